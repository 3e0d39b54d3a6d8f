package rules

import (
	"net/netip"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
)

// Tracing: what the chains felix renders do with one packet, read from
// the same calc.Result the renderer takes, rule by rule as rendered
// (ruleMatches and endpointChain are the rendering this follows). It is
// what `calicoctl policy trace` prints; a privileged test checks it
// against real packets through the real chains.

// Packet is the first packet of a connection: its addresses, IP
// protocol (6 TCP, 17 UDP, 1 ICMP, ...), ports, and for ICMP its type
// and code. Later packets of an allowed connection, and its replies, are
// accepted by the endpoint chains' conntrack rule (ESTABLISHED) without
// any policy.
type Packet struct {
	Src, Dst           netip.Addr
	Protocol           uint8
	SrcPort, DstPort   uint16
	ICMPType, ICMPCode int
}

// TraceKind is which of felix's endpoint chain variants a hop is.
type TraceKind string

const (
	// TraceNormal is a filter chain of a workload or host endpoint:
	// tiers with end-of-tier drops, then the profiles, then a drop.
	TraceNormal TraceKind = "normal"
	// TraceForward is a host endpoint's applyOnForward chain: tiers with
	// end-of-tier drops, no profiles; with no tiers it allows.
	TraceForward TraceKind = "forward"
	// TracePreDNAT (mangle) and TraceUntracked (raw) chains have no
	// end-of-tier drop and no profiles: a packet no policy decided goes
	// on to the filter table.
	TracePreDNAT   TraceKind = "preDNAT"
	TraceUntracked TraceKind = "untracked"
)

// TraceChainInput is one endpoint chain: its kind, the direction of the
// policies' rules it runs, its tiers and profiles, and for a host
// endpoint's chains but the forward ones the failsafe ports (inbound: matched on the
// source net and destination port; outbound: destination net and port).
type TraceChainInput struct {
	Kind     TraceKind
	Ingress  bool
	Tiers    []calc.TierPolicies
	Profiles []string
	Failsafe []ProtoPort
}

// PolicyTrace is one policy a packet reached: the first of its rules
// that matched (Rule is the rule's index in the policy, Action its
// action) or none (Rule -1, Action ""). Logged are the Log rules it
// matched on the way.
type PolicyTrace struct {
	Policy calc.PolicyID
	Rule   int
	Action v3.Action
	Logged []int
}

// TierTrace is one tier a packet went through: the policies it reached,
// in order, and, when none of them decided, the end of tier action (Deny,
// or Pass to the next tier; "" in the chains without end-of-tier drops).
type TierTrace struct {
	Tier      string
	Policies  []PolicyTrace
	EndOfTier v3.Action
}

// ProfileTrace is one profile a packet reached, like PolicyTrace.
type ProfileTrace struct {
	Profile string
	Rule    int
	Action  v3.Action
	Logged  []int
}

// ChainTrace is what one endpoint chain did with a packet: Verdict is
// Allow or Deny, or "" when the chain let the packet go on undecided (a
// preDNAT or untracked chain no policy decided, a forward chain whose
// tiers all passed). Failsafe is set when a failsafe rule accepted it
// before any policy.
type ChainTrace struct {
	Failsafe bool
	Tiers    []TierTrace
	Profiles []ProfileTrace
	Verdict  v3.Action
}

// TraceChain follows pkt through one endpoint chain rendered from res.
func TraceChain(res *calc.Result, in TraceChainInput, pkt Packet) ChainTrace {
	var out ChainTrace
	if failsafeAccepts(in.Failsafe, in.Ingress, pkt) {
		// The failsafe chain accepts in this table only: a raw or
		// mangle chain's accept sets no mark, so the filter table (whose
		// failsafe accepts the same packets) still sees it.
		out.Failsafe = true
		if in.Kind == TraceNormal {
			out.Verdict = v3.Allow
		}
		return out
	}
	for _, t := range in.Tiers {
		tt, verdict := traceTier(res, in, t, pkt)
		out.Tiers = append(out.Tiers, tt)
		if verdict != "" {
			out.Verdict = verdict
			return out
		}
	}
	switch in.Kind {
	case TraceForward:
		if len(in.Tiers) == 0 {
			out.Verdict = v3.Allow // "Allow forwarded traffic by default"
		}
	case TraceNormal:
		for _, name := range in.Profiles {
			pt := ProfileTrace{Profile: name, Rule: -1}
			if p := res.Profiles[name]; p != nil {
				pt.Rule, pt.Action, pt.Logged = firstMatch(res, direction(p.Ingress, p.Egress, in.Ingress), pkt)
			}
			out.Profiles = append(out.Profiles, pt)
			if pt.Action == v3.Allow || pt.Action == v3.Deny {
				out.Verdict = pt.Action
				return out
			}
		}
		out.Verdict = v3.Deny // "Drop if no profiles matched"
	}
	return out
}

// traceTier follows pkt through one tier: the verdict is Allow or Deny
// when a policy or the end of the tier decided, "" when it goes on.
func traceTier(res *calc.Result, in TraceChainInput, t calc.TierPolicies, pkt Packet) (TierTrace, v3.Action) {
	tt := TierTrace{Tier: t.Tier}
	for _, id := range t.Policies {
		pt := PolicyTrace{Policy: id, Rule: -1}
		if p := res.Policies[id]; p != nil {
			pt.Rule, pt.Action, pt.Logged = firstMatch(res, direction(p.Ingress, p.Egress, in.Ingress), pkt)
		}
		tt.Policies = append(tt.Policies, pt)
		switch pt.Action {
		case v3.Allow, v3.Deny:
			return tt, pt.Action
		case v3.Pass:
			return tt, "" // the rest of the tier is skipped, and its end
		}
	}
	switch {
	case t.DefaultAction == v3.Pass:
		tt.EndOfTier = v3.Pass
	case in.Kind == TraceNormal || in.Kind == TraceForward:
		tt.EndOfTier = v3.Deny
		return tt, v3.Deny
	}
	return tt, ""
}

func direction(ingress, egress []calc.Rule, in bool) []calc.Rule {
	if in {
		return ingress
	}
	return egress
}

// firstMatch is the first rule of rules that matches pkt and does not
// only log: its index in its policy and its action (-1 and "" for none),
// and the Log rules matched before it.
func firstMatch(res *calc.Result, rules []calc.Rule, pkt Packet) (int, v3.Action, []int) {
	var logged []int
	for i := range rules {
		r := &rules[i]
		if !RuleMatches(res, r, pkt) {
			continue
		}
		switch r.Action {
		case v3.Log:
			logged = append(logged, r.Index)
			continue
		case v3.Allow, v3.Deny, v3.Pass:
			return r.Index, r.Action, logged
		default:
			return r.Index, v3.Deny, logged // rendered as a drop
		}
	}
	return -1, "", logged
}

// RuleMatches reports whether the iptables rules r renders to (in pkt's
// IP version) match pkt, with the members of res's ipsets.
func RuleMatches(res *calc.Result, r *calc.Rule, pkt Packet) bool {
	v := 4
	if pkt.Src.Is6() && !pkt.Src.Is4In6() {
		v = 6
	}
	if r.IPVersion != 0 && r.IPVersion != v {
		return false // not rendered in this IP version
	}
	if r.Protocol != 0 && pkt.Protocol != r.Protocol || r.NotProtocol != 0 && pkt.Protocol == r.NotProtocol {
		return false
	}
	if !entityMatches(res, &r.Src, pkt.Src, pkt.SrcPort, pkt.Protocol, v) ||
		!entityMatches(res, &r.Dst, pkt.Dst, pkt.DstPort, pkt.Protocol, v) {
		return false
	}
	if r.ICMP != nil && !icmpMatches(r.ICMP, pkt) || r.NotICMP != nil && icmpMatches(r.NotICMP, pkt) {
		return false
	}
	return true
}

func icmpMatches(m *calc.ICMPMatch, pkt Packet) bool {
	return pkt.ICMPType == m.Type && (m.Code == nil || *m.Code == pkt.ICMPCode)
}

// entityMatches is one side of a rule as entity renders it.
func entityMatches(res *calc.Result, e *calc.EntityMatch, a netip.Addr, port uint16, proto uint8, v int) bool {
	if len(e.Nets) > 0 {
		nets := familyNets(e.Nets, v)
		if len(nets) == 0 || !containsAddr(nets, a) {
			return false // no net of this family: the rule is not rendered
		}
	}
	if containsAddr(familyNets(e.NotNets, v), a) {
		return false
	}
	if e.SelSet != "" && !netSetHas(res, e.SelSet, a) || e.NotSelSet != "" && netSetHas(res, e.NotSelSet, a) {
		return false
	}
	if e.SvcSet != "" && !svcSetHas(res, e.SvcSet, a, proto, port) {
		return false
	}
	if inRanges(e.NotPorts, port) || slices.ContainsFunc(e.NotNamedPortSets, func(id string) bool { return portSetHas(res, id, a, proto, port) }) {
		return false
	}
	if len(e.Ports) == 0 && len(e.NamedPortSets) == 0 {
		return true
	}
	return inRanges(e.Ports, port) || slices.ContainsFunc(e.NamedPortSets, func(id string) bool { return portSetHas(res, id, a, proto, port) })
}

func familyNets(nets []netip.Prefix, v int) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range nets {
		if n.Addr().Is4() == (v == 4) {
			out = append(out, n)
		}
	}
	return out
}

func containsAddr(nets []netip.Prefix, a netip.Addr) bool {
	return slices.ContainsFunc(nets, func(n netip.Prefix) bool { return n.Contains(a) })
}

func inRanges(ranges []calc.PortRange, port uint16) bool {
	return slices.ContainsFunc(ranges, func(r calc.PortRange) bool { return r.Min <= port && port <= r.Max })
}

// netSetHas reports whether a hash:net set of res holds a.
func netSetHas(res *calc.Result, id string, a netip.Addr) bool {
	set := res.IPSets[id]
	if set == nil {
		return false
	}
	for m := range set.Members.All() {
		if p, err := netip.ParsePrefix(m); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}

// portSetHas reports whether a hash:ip,port set of res holds a with
// proto and port.
func portSetHas(res *calc.Result, id string, a netip.Addr, proto uint8, port uint16) bool {
	set := res.IPSets[id]
	return set != nil && set.Members.Has(calc.IPPortMember(a, proto, port))
}

// failsafeAccepts reports whether a failsafe rule accepts pkt: inbound
// on its source net and destination port, outbound on its destination
// net and destination port.
func failsafeAccepts(ports []ProtoPort, inbound bool, pkt Packet) bool {
	peer := pkt.Dst
	if inbound {
		peer = pkt.Src
	}
	for _, pp := range ports {
		proto := strings.ToLower(pp.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		if protoNumber(proto) != pkt.Protocol || pp.Port != pkt.DstPort {
			continue
		}
		if pp.Net != "" {
			n, err := parseNet(pp.Net)
			if err != nil || !n.Contains(peer) {
				continue
			}
		}
		return true
	}
	return false
}

func protoNumber(name string) uint8 {
	switch name {
	case "tcp":
		return 6
	case "udp":
		return 17
	case "sctp":
		return 132
	}
	return 0
}

func parseNet(s string) (netip.Prefix, error) {
	if n, err := netip.ParsePrefix(s); err == nil {
		return n.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// svcSetHas reports whether a Service's set of res holds a (a source
// side's hash:net set) or a with proto and port (a destination side's
// hash:ip,port set).
func svcSetHas(res *calc.Result, id string, a netip.Addr, proto uint8, port uint16) bool {
	if set := res.IPSets[id]; set != nil && set.Type == calc.HashIPPort {
		return portSetHas(res, id, a, proto, port)
	}
	return netSetHas(res, id, a)
}
