package render

import (
	"fmt"
	"net/netip"
	"strings"
)

// Render returns the BIRD 2 configuration for in.NodeName. The same input
// always gives the same text. Errors say which resource is wrong and why;
// the caller keeps the running configuration when Render fails.
func Render(in Input) (string, error) {
	m, err := build(in)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(in.LogFile, "\"\\\n") {
		return "", fmt.Errorf("log file %q holds a quote, backslash or newline", in.LogFile)
	}
	for _, i := range m.ignored {
		if strings.ContainsAny(i, "\"\\\n") {
			return "", fmt.Errorf("BGPConfiguration ignoredInterfaces: %q holds a quote, backslash or newline", i)
		}
	}
	w := &writer{}
	w.header(m)
	w.shared(m)
	w.bgpFilters(m)
	for _, f := range m.fam {
		if f != nil {
			w.family(m, f)
		}
	}
	return w.String(), nil
}

type writer struct{ strings.Builder }

func (w *writer) p(format string, args ...any) {
	fmt.Fprintf(w, format, args...)
	w.WriteByte('\n')
}

func (w *writer) header(m *model) {
	w.p("# BIRD 2 configuration for node %s, rendered by Tabby confd. Do not edit.", m.nodeName)
	// Always name a log target: without one BIRD logs to syslog, and where
	// /dev/log is missing (containers) each message stalls it; measured here,
	// a configure with 1,000 sessions took 1-3 s instead of 10 ms.
	if m.logFile != "" {
		w.p("log %q all;", m.logFile)
	} else {
		w.p("log stderr all;")
	}
	w.p("router id %s;", m.routerID)
	w.p("timeformat protocol iso long;")
	w.p("")
	w.p("protocol device {")
	w.p("  scan time 2;")
	w.p("}")
}

func (w *writer) shared(m *model) {
	w.p(`
# Priority of a route to export: iBGP carries it as LOCAL_PREF = 2^31-1 - metric.
# Kernel routes installed with metric 0 count as normal priority (%d).
function tabby_priority() {
  if source = RTS_BGP && defined(bgp_local_pref) then
    krt_metric = %d - bgp_local_pref;
  else {
    if !defined(krt_metric) || krt_metric = 0 then krt_metric = %d;
    bgp_local_pref = %d - krt_metric;
  }
}

# Routes from any BGP peer: an elevated-priority route beats a local one.
function tabby_import() {
  if defined(bgp_local_pref) && bgp_local_pref > %d then preference = 200;
}

filter tabby_in {
  tabby_import();
  accept;
}`, normalPriority, maxPref, normalPriority, maxPref, maxPref-normalPriority)
}

func (w *writer) bgpFilters(m *model) {
	if len(m.filters) == 0 {
		return
	}
	w.p("\n# ---- BGPFilters (applied in the channels of the peers that name them) ----")
	for _, f := range m.filters {
		for dir := range numDirs {
			if len(f.rules[dir]) == 0 {
				continue
			}
			w.p("\n# BGPFilter %s", f.name)
			w.p("function %s(bool internal_peer) {", f.funcName(dir))
			for _, r := range f.rules[dir] {
				w.p("  %s", r)
			}
			w.p("}")
		}
	}
}

func prefixSet(ps []netip.Prefix, suffix string) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String() + suffix
	}
	return "[ " + strings.Join(s, ", ") + " ]"
}

func (w *writer) family(m *model, f *family) {
	v := f.v
	w.p("\n# ======================== IPv%d ========================", v)

	w.p("\n# Blocks whose IPAM affinity is this node: unassigned addresses drop here.")
	w.p("protocol static tabby_blocks%d {", v)
	w.p("  ipv%d;", v)
	for _, b := range f.blocks {
		w.p("  route %s blackhole;", b)
	}
	w.p("}")

	w.p("\n# Announce each owned block whole; its /32s stay local unless elevated (metric < %d).", normalPriority)
	w.p("function tabby_own_blocks%d() {", v)
	if len(f.blocks) > 0 {
		w.p("  if net ~ %s then accept;", prefixSet(f.blocks, ""))
		w.p("  if net ~ %s then {", prefixSet(f.blocks, "+"))
		w.p("    if krt_metric < %d then accept;", normalPriority)
		w.p("    reject;")
		w.p("  }")
	}
	w.p("}")

	w.p("\n# BGPConfiguration prefixAdvertisements.")
	w.p("function tabby_communities%d() {", v)
	for _, c := range f.comms {
		w.p("  if net ~ %s then {", c.cidr)
		for _, s := range c.std {
			w.p("    bgp_community.add((%d, %d));", s[0], s[1])
		}
		for _, l := range c.large {
			w.p("    bgp_large_community.add((%d, %d, %d));", l[0], l[1], l[2])
		}
		w.p("  }")
	}
	w.p("}")

	w.p("\n# What this node announces; the caller rejects whatever falls through.")
	w.p("function tabby_announce%d(bool internal_peer) {", v)
	w.p("  # Tunnel routes belong to the node agent and never go to iBGP peers.")
	w.p(`  if internal_peer && (ifname ~ "tunl*" || ifname ~ "vxlan*.calico" || ifname ~ "wireguard.cali" || ifname ~ "wg-v6.cali") then reject;`)
	if len(f.poolsOff) > 0 {
		w.p("  if net ~ %s then reject;  # pools with disableBGPExport", prefixSet(f.poolsOff, "+"))
	}
	w.p("  tabby_communities%d();", v)
	w.p("  tabby_own_blocks%d();", v)
	if len(f.poolsOn) > 0 {
		w.p("  if net ~ %s then accept;  # pools with BGP export", prefixSet(f.poolsOn, "+"))
	}
	w.p("}")

	for _, internal := range []bool{true, false} {
		kind := map[bool]string{true: "ibgp", false: "ebgp"}[internal]
		w.p("\nfilter tabby_out_%s%d {", kind, v)
		w.p("  tabby_priority();")
		w.p("  tabby_announce%d(%t);", v, internal)
		w.p("  reject;")
		w.p("}")
	}

	w.p("\n# Routes handed to the Linux FIB.")
	w.p("filter tabby_to_kernel%d {", v)
	w.p("  if source = RTS_DEVICE then reject;  # connected subnets belong to the kernel")
	if len(f.poolsEnc) > 0 {
		w.p("  if source = RTS_BGP && net ~ %s then reject;  # IPIP/VXLAN pools: the node agent programs them", prefixSet(f.poolsEnc, "+"))
	}
	w.p("  if source = RTS_BGP then {")
	w.p("    krt_metric = %d;", normalPriority)
	w.p("    if defined(bgp_local_pref) then krt_metric = %d - bgp_local_pref;", maxPref)
	w.p("  }")
	w.p("  accept;")
	w.p("}")

	w.p("\nprotocol kernel tabby_kernel%d {", v)
	w.p("  ipv%d {", v)
	w.p("    import all;")
	w.p("    export filter tabby_to_kernel%d;", v)
	w.p("  };")
	w.p("  learn;")
	w.p("  persist;")
	w.p("  scan time 2;")
	w.p("  graceful restart;")
	w.p("  merge paths on;")
	w.p("  metric 0;  # honour krt_metric (BIRD 2 would force 32)")
	w.p("}")

	w.p("\n# Connected subnets, so recursive BGP next hops resolve over the node link.")
	w.p("protocol direct tabby_direct%d {", v)
	w.p("  ipv%d;", v)
	var ifs []string
	for _, i := range m.ignored {
		ifs = append(ifs, fmt.Sprintf("-%q", i))
	}
	ifs = append(ifs, `-"cali*"`, `-"kube-ipvs*"`, `"*"`)
	w.p("  interface %s;", strings.Join(ifs, ", "))
	w.p("}")

	w.p("\ntemplate bgp tabby_bgp%d {", v)
	w.p(`  description "Connection to BGP peer";`)
	w.p("  debug { states };")
	w.p("  multihop;")
	w.p("  ttl security off;")
	w.p("  graceful restart on;")
	w.p("  connect delay time 2;")
	w.p("  connect retry time 5;")
	w.p("  error wait time 5, 30;")
	w.p("  ipv%d {", v)
	w.p("    gateway recursive;")
	w.p("    add paths on;")
	w.p("    import filter tabby_in;")
	w.p("  };")
	w.p("}")

	if len(f.peers) == 0 {
		w.p("\n# No BGP peers for IPv%d.", v)
	}
	for _, p := range f.peers {
		w.peer(m, f, p)
	}
}

func (w *writer) peer(m *model, f *family, p *peer) {
	v := f.v
	w.p("\n# %s", p.origin)
	w.p("protocol bgp %s from tabby_bgp%d {", p.name, v)
	local := "local"
	switch {
	case f.bindNodeIP:
		local += " " + f.nodeIP.String()
	case p.source.IsValid():
		local += " " + p.source.String()
	}
	if port := portOrDefault(f.listenPort); port != 0 {
		local += fmt.Sprintf(" port %d", port)
	}
	w.p("  %s as %d;", local, p.localAS)
	if f.bindNodeIP {
		w.p("  strict bind on;")
	}
	nb := "neighbor " + p.ip.String()
	if p.port != 0 {
		nb += fmt.Sprintf(" port %d", p.port)
	}
	w.p("  %s as %d;", nb, p.asn)
	if p.passive {
		w.p("  passive on;  # our address is the lower one: the peer connects")
	}
	if p.hasPassword {
		w.p("  password \"%s\";", p.password) // checked: no quote, backslash or control character
	}
	if p.restartTime > 0 {
		w.p("  graceful restart time %d;", p.restartTime)
	}
	if p.keepalive > 0 {
		w.p("  keepalive time %d;", p.keepalive)
		w.p("  hold time %d;", 3*p.keepalive)
	}
	if p.ttlSecurity > 0 {
		w.p("  ttl security on;")
		w.p("  multihop %d;", p.ttlSecurity)
	}
	if p.rrClient {
		w.p("  rr client;")
		w.p("  rr cluster id %s;", m.rrID)
	}
	if p.allowLocalAS > 0 {
		w.p("  allow local as %d;", p.allowLocalAS)
	}
	kind := "ebgp"
	if p.internal() {
		kind = "ibgp"
	}
	w.p("  ipv%d {", v)
	imp, exp := p.filterCalls(v)
	if len(imp) > 0 {
		w.p("    import filter {")
		for _, c := range imp {
			w.p("      %s", c)
		}
		w.p("      tabby_import();")
		w.p("      accept;")
		w.p("    };")
	}
	if len(exp) > 0 {
		w.p("    export filter {")
		w.p("      tabby_priority();")
		for _, c := range exp {
			w.p("      %s", c)
		}
		w.p("      tabby_announce%d(%t);", v, p.internal())
		w.p("      reject;")
		w.p("    };")
	} else {
		w.p("    export filter tabby_out_%s%d;", kind, v)
	}
	if p.nextHop != "" {
		w.p("    next hop %s;", p.nextHop)
	}
	w.p("  };")
	w.p("}")
}

// filterCalls lists the BGPFilter function calls of the peer's channels.
func (p *peer) filterCalls(v int) (imp, exp []string) {
	di, de := dirImport4, dirExport4
	if v == 6 {
		di, de = dirImport6, dirExport6
	}
	for _, f := range p.filters {
		if len(f.rules[di]) > 0 {
			imp = append(imp, fmt.Sprintf("%s(%t);", f.funcName(di), p.internal()))
		}
		if len(f.rules[de]) > 0 {
			exp = append(exp, fmt.Sprintf("%s(%t);", f.funcName(de), p.internal()))
		}
	}
	return imp, exp
}
