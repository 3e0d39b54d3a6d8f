package commands

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/felix/rules"
)

// hopSpec is one step of a flow's path through felix's chains.
type hopSpec struct {
	node     string
	endpoint string
	ref      calc.EndpointRef
	ingress  bool
	kind     rules.TraceKind
	stage    string
	chain    string
	failsafe []rules.ProtoPort
	// group names the host-side chains an allow by a doNotTrack or
	// preDNAT chain of the group lets the packet skip ("" for none).
	group string
	// fixed is the verdict of one of felix's fixed rules (no chain walk).
	fixed v3.Action
	note  string
}

// Stages of a hop, as the report names them.
const (
	stagePolicy         = "policy"
	stageForward        = "forward"
	stagePreDNAT        = "preDNAT"
	stageUntracked      = "doNotTrack"
	stageEndpointToHost = "endpointToHost"
	stageHostToWorkload = "hostToWorkload"
)

// tracePath lists the chains felix renders that the flow's first packet
// goes through, in order (the chains' own rules are followed by
// rules.TraceChain):
//   - from a workload: its egress chain (cali-fw-); to its own host, then
//     felix's endpoint-to-host action (host endpoint policy does not
//     apply); leaving its node, the applyOnForward egress chain of the
//     host endpoint of the interface it leaves through, or of the node's
//     all-interfaces one;
//   - from a host (host endpoint): to its own workloads always allowed;
//     otherwise its doNotTrack (raw) and normal egress chains;
//   - to a workload from elsewhere than its node: the host endpoint's
//     preDNAT (mangle) and applyOnForward ingress chains (and a named
//     interface's doNotTrack chain) of the interface the flow comes in
//     through, or the node's all-interfaces one, then the workload's
//     ingress chain (cali-tw-);
//   - to a host endpoint: its doNotTrack, preDNAT and normal ingress
//     chains.
//
// Host endpoints on named interfaces police forwarded traffic only when
// the flow crosses that interface, which the routes decide: between
// workloads (or a workload and a host endpoint) of two nodes the trace
// works it out as felix's routes do (see crossing); otherwise a note
// says so instead of guessing.
func tracePath(objs []any, cl *infra.Cluster, from, to traceEnd, endpointToHost string) ([]hopSpec, []string) {
	var hops []hopSpec
	var notes []string
	sameNode := from.node() != "" && from.node() == to.node()
	switch {
	case from.wep != nil:
		hops = append(hops, workloadHop(from, false))
		if to.hep != nil && sameNode {
			verdict := v3.Deny
			if !strings.EqualFold(endpointToHost, "Drop") {
				verdict = v3.Allow
			}
			return append(hops, hopSpec{node: from.node(), endpoint: to.hep.Name, ingress: true, stage: stageEndpointToHost,
				chain: rules.ChainWlToHost, fixed: verdict,
				note: "a workload's traffic to its own host: FelixConfiguration defaultEndpointToHostAction " + endpointToHost +
					" after the workload's egress policy; host endpoint policy does not apply"}), notes
		}
		if !sameNode {
			h, n := forwardHops(objs, cl, from.node(), to, to.addr, false)
			hops, notes = append(hops, h...), append(notes, n...)
		}
	case from.hep != nil:
		if to.wep != nil && sameNode {
			return append(hops, hopSpec{node: from.node(), endpoint: from.hep.Name, stage: stageHostToWorkload, fixed: v3.Allow,
				chain: rules.ChainFilterOutput, note: "felix always allows a host's traffic to its own workloads"}), notes
		}
		hops = append(hops, hostHops(from.hep, false)...)
	}
	switch {
	case to.wep != nil:
		if !sameNode {
			h, n := forwardHops(objs, cl, to.node(), from, to.addr, true)
			hops, notes = append(hops, h...), append(notes, n...)
		}
		hops = append(hops, workloadHop(to, true))
	case to.hep != nil:
		hops = append(hops, hostHops(to.hep, true)...)
	}
	return hops, notes
}

func workloadHop(e traceEnd, ingress bool) hopSpec {
	prefix := rules.PrefixFromWorkload
	if ingress {
		prefix = rules.PrefixToWorkload
	}
	name := e.wep.Spec.Pod
	if name == "" {
		name = e.wep.Name
	}
	return hopSpec{node: e.node(), endpoint: e.wep.Namespace + "/" + name, ref: e.ref(), ingress: ingress,
		kind: rules.TraceNormal, stage: stagePolicy, chain: prefix + e.wep.Spec.InterfaceName}
}

// hostHops are a host endpoint's chains for traffic to (ingress) or from
// the host.
func hostHops(h *v3.HostEndpoint, ingress bool) []hopSpec {
	suffix := h.Spec.InterfaceName
	switch suffix {
	case "*":
		suffix = rules.AllInterfaces
	case "":
		suffix = "<interface holding " + strings.Join(h.Spec.ExpectedIPs, ",") + ">"
	}
	base := hopSpec{node: h.Spec.Node, endpoint: h.Name, ref: calc.EndpointRef{Kind: calc.Host, Key: h.Name}, ingress: ingress}
	failsafe, prefix, dir := rules.DefaultFailsafeOutbound(), rules.PrefixToHostEp, "out"
	if ingress {
		failsafe, prefix, dir = rules.DefaultFailsafeInbound(), rules.PrefixFromHostEp, "in"
	}
	base.failsafe, base.chain, base.group = failsafe, prefix+suffix, "host:"+h.Name+":"+dir
	var hops []hopSpec
	if h.Spec.InterfaceName != "*" { // as Calico: no untracked policy on "*"
		hop := base
		hop.kind, hop.stage, hop.chain = rules.TraceUntracked, stageUntracked, "raw "+base.chain
		hops = append(hops, hop)
	}
	if ingress {
		hop := base
		hop.kind, hop.stage, hop.chain = rules.TracePreDNAT, stagePreDNAT, "mangle "+base.chain
		hops = append(hops, hop)
	}
	hop := base
	hop.kind, hop.stage = rules.TraceNormal, stagePolicy
	return append(hops, hop)
}

// forwardHops are the chains of the host endpoint of node that polices
// the flow forwarded out of (ingress false) or into node, to or from the
// remote end: the named host endpoint of the interface the flow crosses
// (see crossing), else node's all-interfaces ("*") one, as felix's
// dispatch chains pick them. Named host endpoints the trace cannot place
// on the flow's way get a note instead of a guess.
func forwardHops(objs []any, cl *infra.Cluster, node string, remote traceEnd, dst netip.Addr, ingress bool) ([]hopSpec, []string) {
	var star, hit *v3.HostEndpoint
	var named []*v3.HostEndpoint
	for _, o := range objs {
		if h, ok := o.(*v3.HostEndpoint); ok && h.Spec.Node == node {
			if h.Spec.InterfaceName == "*" {
				star = h
			} else if h.Spec.InterfaceName != "" {
				named = append(named, h)
			}
		}
	}
	dev, where, known := crossing(cl, node, remote, dst)
	var notes []string
	if len(named) > 0 {
		for _, h := range named {
			if known && (h.Spec.InterfaceName == dev || dev == "" && holds(h.Spec.ExpectedIPs, where)) {
				hit = h
			}
		}
		if hit == nil {
			var names []string
			for _, h := range named {
				names = append(names, h.Name)
			}
			sort.Strings(names)
			why := "which this trace does not know (the other end is no endpoint of a node in an IP pool)"
			if known {
				why = "and this flow crosses " + crossingName(dev, where) + ", which none of them names (by interfaceName, or expectedIPs holding the address)"
			}
			notes = append(notes, fmt.Sprintf("node %s has host endpoints on named interfaces (%s): their preDNAT and applyOnForward policy applies when the flow crosses their interface, %s", node, strings.Join(names, ", "), why))
		}
	}
	h, suffix := hit, ""
	switch {
	case hit != nil:
		suffix = hit.Spec.InterfaceName
	case star != nil:
		h, suffix = star, rules.AllInterfaces
	default:
		return nil, notes
	}
	base := hopSpec{node: node, endpoint: h.Name, ref: calc.EndpointRef{Kind: calc.Host, Key: h.Name}, ingress: ingress}
	if !ingress {
		base.kind, base.stage, base.chain = rules.TraceForward, stageForward, rules.PrefixToHostEpFwd+suffix
		return []hopSpec{base}, notes
	}
	base.group = "forward:" + node
	var hops []hopSpec
	if hit != nil { // as Calico: no untracked policy on "*"
		raw := base
		raw.kind, raw.stage, raw.chain = rules.TraceUntracked, stageUntracked, "raw "+rules.PrefixFromHostEp+suffix
		hops = append(hops, raw)
	}
	pre := base
	pre.kind, pre.stage, pre.chain, pre.failsafe = rules.TracePreDNAT, stagePreDNAT, "mangle "+rules.PrefixFromHostEp+suffix, rules.DefaultFailsafeInbound()
	fwd := base
	fwd.kind, fwd.stage, fwd.chain = rules.TraceForward, stageForward, rules.PrefixFromHostEpFwd+suffix
	return append(hops, pre, fwd), notes
}

// crossing is the interface of node a flow to dst between node and the
// remote end crosses, as felix's routes send it (routes.Via): a tunnel
// device (dev), or the underlay ("" and where, node's own address, which
// the interface holds). known is false when the remote end is no
// endpoint of another node or the Nodes and pools do not say.
func crossing(cl *infra.Cluster, node string, remote traceEnd, dst netip.Addr) (dev string, where netip.Addr, known bool) {
	if cl == nil || remote.node() == "" || remote.node() == node {
		return "", netip.Addr{}, false
	}
	me, ok := cl.Node(node)
	peer, ok2 := cl.Node(remote.node())
	if !ok || !ok2 {
		return "", netip.Addr{}, false
	}
	v6 := dst.Is6()
	mine, theirs := me.Fam(v6), peer.Fam(v6)
	if !mine.Addr.IsValid() || !theirs.Addr.IsValid() {
		return "", netip.Addr{}, false
	}
	pl, inPool := cl.PoolOf(netip.PrefixFrom(dst, dst.BitLen()))
	switch {
	case inPool:
		dev = routes.Via(pl, mine, theirs, v6)
	case remote.hep == nil:
		return "", netip.Addr{}, false
	}
	return dev, mine.Addr.Addr(), true
}

func crossingName(dev string, where netip.Addr) string {
	if dev != "" {
		return dev
	}
	return "the interface holding the node's address " + where.String()
}

// tiersFor is the hop's tiers of the endpoint (and its profiles, for the
// chains that have them).
func (h hopSpec) tiersFor(ep *calc.Endpoint) ([]calc.TierPolicies, []string) {
	pick := func(in, out []calc.TierPolicies) []calc.TierPolicies {
		if h.ingress {
			return in
		}
		return out
	}
	switch h.kind {
	case rules.TraceForward:
		return pick(ep.ForwardIngress, ep.ForwardEgress), nil
	case rules.TracePreDNAT:
		return ep.PreDNATIngress, nil
	case rules.TraceUntracked:
		return pick(ep.UntrackedIngress, ep.UntrackedEgress), nil
	}
	return pick(ep.Ingress, ep.Egress), ep.Profiles
}

// tracer runs one trace: a path over one set of objects (the cluster's,
// or with the staged policies enforced).
type tracer struct {
	in    calc.Input // the objects the path needs, Node unset
	index *policyIndex
	pkt   rules.Packet
	// results caches the calculation per node.
	results map[string]*calc.Result
}

// newTracer narrows objs once to what the path's chains need (its
// endpoints, the items holding the flow's addresses).
func newTracer(objs []any, index *policyIndex, path []hopSpec, addrs []netip.Addr, pkt rules.Packet) *tracer {
	t := &tracer{index: index, pkt: pkt, results: map[string]*calc.Result{}}
	var in calc.Input
	for _, o := range objs {
		in.Add(o)
	}
	f := calc.Focus{Addrs: addrs}
	for _, h := range path {
		if h.ref != (calc.EndpointRef{}) {
			f.Endpoints = append(f.Endpoints, h.ref)
		}
	}
	t.in = f.Narrow(in)
	return t
}

// run traces the path: each hop's chain trace, in order, until a chain
// denies (later hops are left out); the verdict.
func (t *tracer) run(path []hopSpec) ([]hopResult, v3.Action, error) {
	var out []hopResult
	skip := map[string]bool{}
	for _, h := range path {
		if h.group != "" && skip[h.group] {
			out = append(out, hopResult{spec: h, skipped: true})
			continue
		}
		if h.fixed != "" {
			out = append(out, hopResult{spec: h, trace: rules.ChainTrace{Verdict: h.fixed}})
			if h.fixed == v3.Deny {
				return out, v3.Deny, nil
			}
			continue
		}
		ct, err := t.chain(h)
		if err != nil {
			return nil, "", err
		}
		out = append(out, hopResult{spec: h, trace: ct})
		switch {
		case ct.Verdict == v3.Deny:
			return out, v3.Deny, nil
		case ct.Verdict == v3.Allow && (h.kind == rules.TraceUntracked || h.kind == rules.TracePreDNAT):
			skip[h.group] = true // raw/mangle accepted: filter accepts marked packets
		}
	}
	return out, v3.Allow, nil
}

// hopResult is one hop traced.
type hopResult struct {
	spec    hopSpec
	skipped bool
	trace   rules.ChainTrace
}

// chain runs felix's calculation for the hop's node narrowed to its
// endpoint and the flow, and follows the packet through the chain.
func (t *tracer) chain(h hopSpec) (rules.ChainTrace, error) {
	res, ok := t.results[h.node]
	if !ok {
		in := t.in
		in.Node = h.node
		res = calc.Compute(in)
		t.results[h.node] = res
	}
	for i := range res.Endpoints {
		ep := &res.Endpoints[i]
		if ep.Kind == h.ref.Kind && ep.Key == h.ref.Key {
			tiers, profiles := h.tiersFor(ep)
			in := rules.TraceChainInput{Kind: h.kind, Ingress: h.ingress, Tiers: tiers, Profiles: profiles, Failsafe: h.failsafe}
			return rules.TraceChain(res, in, t.pkt), nil
		}
	}
	var why []string
	for _, p := range res.Problems {
		why = append(why, p.String())
	}
	return rules.ChainTrace{}, fmt.Errorf("felix does not program endpoint %s on node %s: %s", h.ref.Key, h.node, strings.Join(why, "; "))
}
