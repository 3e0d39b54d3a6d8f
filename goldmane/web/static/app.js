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

function rowHTML(r) {
  const f = r.f, t = totals(r), d = decision(f.enforced), p = decision(f.pending);
  const changes = p && p.action !== f.action;
  const trace = f.trace ? "<code class=trace title='run this to see why'>" + esc(f.trace) + "</code>"
    : (f.action === "Deny" ? "<span class=muted>needs an IP</span>" : "");
  return "<tr class='" + esc(f.action) + "' data-id='" + f.id + "'><td>" + new Date(t.end * 1000).toLocaleTimeString() +
    "</td><td>" + esc(endName(f.src_ns, f.src, f.src_type)) + "</td><td>" + esc(endName(f.dst_ns, f.dst, f.dst_type)) +
    "</td><td>" + esc(f.proto + (f.port ? "/" + f.port : "")) + "</td><td>" + esc(f.reporter) +
    "</td><td class=action>" + esc(f.action) + "</td><td class=policy>" + (d ? esc(hitName(d)) : "") +
    "</td><td class='pending" + (changes ? " changes" : "") + "'>" + (p ? esc(p.action + " by " + hitName(p)) : "") +
    "</td><td>" + t.pk + "</td><td>" + t.by + "</td><td>" + trace + "</td></tr>";
}

let renderQueued = false;
function render() {
  renderQueued = false;
  const flt = filters();
  const shown = [];
  let allow = 0, deny = 0;
  for (const r of rows.values()) {
    if (!matches(r.f, flt)) continue;
    shown.push(r);
    if (r.f.action === "Deny") deny++; else allow++;
  }
  shown.sort((a, b) => totals(b).end - totals(a).end || a.f.id - b.f.id);
  $("rows").innerHTML = shown.map(rowHTML).join("");
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
      rows: $("rows").rows.length};
  }, 0));
  for (const id of ["f-namespace", "f-action", "f-reporter", "f-pending"]) $(id).addEventListener("change", queueRender);
  $("f-policy").addEventListener("input", queueRender);
  follow();
}

load();
