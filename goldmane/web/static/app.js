// Tabby's flow page: one load of every kept flow, then each interval's
// changes over server-sent events; filters run in the browser.
"use strict";

const rows = new Map(); // flow id -> {f: flow from the list, extra: {intervalStart: flow}}
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));

function endName(ns, name, type) {
  if (type === "wep" || type === "ns") return ns ? ns + "/" + name : name;
  if (type === "hep") return "host endpoint " + name;
  return name; // pub, pvt
}

function hitName(h) {
  if (h.kind === "eot") return "end of tier " + h.tier;
  if (h.kind === "pro") return h.name ? "profile " + h.name : "no profile";
  return (h.tier && h.tier !== "default" ? h.tier + " / " : "") + h.kind + ":" + (h.namespace ? h.namespace + "/" : "") + h.name + (h.rule >= 0 ? " rule " + h.rule : "");
}

// decision is the hit that decided the flow: the last of the path.
function decision(hits) { return hits && hits.length ? hits[hits.length - 1] : null; }

// totals: the list's sum plus the intervals streamed after it.
function totals(r) {
  const t = {end: r.f.end, pk: r.f.packets_in + r.f.packets_out, by: r.f.bytes_in + r.f.bytes_out};
  for (const x of Object.values(r.extra)) {
    t.end = Math.max(t.end, x.end);
    t.pk += x.packets_in + x.packets_out;
    t.by += x.bytes_in + x.bytes_out;
  }
  return t;
}

function matches(f, flt) {
  if (flt.namespace && f.src_ns !== flt.namespace && f.dst_ns !== flt.namespace) return false;
  if (flt.action && f.action !== flt.action) return false;
  if (flt.reporter && f.reporter !== flt.reporter) return false;
  if (flt.policy) {
    const hit = (h) => (h.name || "").includes(flt.policy) || (h.kind === "eot" && ("end of tier " + h.tier).includes(flt.policy));
    if (!f.enforced.some(hit) && !f.pending.some(hit)) return false;
  }
  if (flt.pending) {
    const p = decision(f.pending);
    if (!p) return false;
    if (flt.pending === "changes" ? p.action === f.action : p.action !== flt.pending) return false;
  }
  return true;
}

function filters() {
  return {namespace: $("f-namespace").value, policy: $("f-policy").value.trim(), action: $("f-action").value,
    reporter: $("f-reporter").value, pending: $("f-pending").value};
}

// clock is a time of day (toLocaleTimeString builds a formatter per call:
// seconds for 10,000 rows).
const pad = (n) => String(n).padStart(2, "0");
function clock(sec) {
  const d = new Date(sec * 1000);
  return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
}

function rowHTML(r, t) {
  const f = r.f, d = decision(f.enforced), p = decision(f.pending);
  const changes = p && p.action !== f.action;
  const trace = f.trace ? "<code class=trace title='why: run this (click to copy)'>" + esc(f.trace) + "</code>"
    : (f.action === "Deny" ? "<span class=muted>needs an IP</span>" : "");
  return "<div class='row " + esc(f.action) + "' data-id='" + f.id + "'><span>" + clock(t.end) +
    "</span><span>" + esc(endName(f.src_ns, f.src, f.src_type)) + "</span><span>" + esc(endName(f.dst_ns, f.dst, f.dst_type)) +
    "</span><span>" + esc(f.proto + (f.port ? "/" + f.port : "")) + "</span><span>" + esc(f.reporter) +
    "</span><span class=action>" + esc(f.action) + "</span><span class=policy>" + (d ? esc(hitName(d)) : "") +
    "</span><span class='pending" + (changes ? " changes" : "") + "'>" + (p ? esc(p.action + " by " + hitName(p)) : "") +
    "</span><span>" + t.pk + "</span><span>" + t.by + "</span><span>" + trace + "</span></div>";
}

const chunkRows = 100;
let renderQueued = false;
function render() {
  renderQueued = false;
  const flt = filters();
  const shown = [];
  let allow = 0, deny = 0;
  for (const r of rows.values()) {
    if (!matches(r.f, flt)) continue;
    shown.push({r: r, t: totals(r)});
    if (r.f.action === "Deny") deny++; else allow++;
  }
  shown.sort((a, b) => b.t.end - a.t.end || a.r.f.id - b.r.f.id);
  const html = [];
  for (let i = 0; i < shown.length; i += chunkRows) {
    html.push("<div class=chunk>" + shown.slice(i, i + chunkRows).map((x) => rowHTML(x.r, x.t)).join("") + "</div>");
  }
  $("rows").innerHTML = html.join("");
  $("summary").textContent = shown.length + " of " + rows.size + " flows: " + allow + " allowed, " + deny + " denied";
}
function queueRender() {
  if (!renderQueued) { renderQueued = true; requestAnimationFrame(render); }
}

function fillHints() {
  const nss = new Set(), pols = new Set();
  for (const r of rows.values()) {
    if (r.f.src_ns) nss.add(r.f.src_ns);
    if (r.f.dst_ns) nss.add(r.f.dst_ns);
    for (const h of r.f.enforced.concat(r.f.pending)) if (h.name) pols.add(h.name);
  }
  const sel = $("f-namespace"), cur = sel.value;
  sel.innerHTML = "<option value=''>any</option>" + [...nss].sort().map((n) => "<option>" + esc(n) + "</option>").join("");
  sel.value = cur;
  $("policies").innerHTML = [...pols].sort().map((n) => "<option value='" + esc(n) + "'>").join("");
}

function follow() {
  const es = new EventSource("api/stream");
  es.onopen = () => { $("live").textContent = "live"; };
  es.onerror = () => { $("live").textContent = "reconnecting…"; };
  es.onmessage = (ev) => {
    for (const f of JSON.parse(ev.data)) {
      const r = rows.get(f.id);
      if (!r) { rows.set(f.id, {f: f, extra: {}}); continue; }
      if (f.start >= r.f.end) r.extra[f.start] = f; // a later interval (a repeat replaces)
    }
    fillHints();
    queueRender();
  };
}

async function load() {
  const t0 = performance.now();
  const res = await fetch("api/flows", {cache: "no-store"});
  const flows = await res.json();
  const t1 = performance.now();
  for (const f of flows) rows.set(f.id, {f: f, extra: {}});
  fillHints();
  render();
  // Measured by make bench-goldmane (after the frame is painted): the
  // list call, list through render, and navigation start to render.
  requestAnimationFrame(() => setTimeout(() => {
    window.tabbyLoaded = {fetchMs: t1 - t0, renderMs: performance.now() - t0, sinceNavigationMs: performance.now(),
      rows: document.querySelectorAll("#rows .row").length};
  }, 0));
  for (const id of ["f-namespace", "f-action", "f-reporter", "f-pending"]) $(id).addEventListener("change", queueRender);
  $("f-policy").addEventListener("input", queueRender);
  $("rows").addEventListener("click", (ev) => {
    const c = ev.target.closest("code.trace");
    if (c && navigator.clipboard) navigator.clipboard.writeText(c.textContent);
  });
  follow();
}

load();
