package calc

import (
	"fmt"
	"slices"
	"strings"
)

// String renders the Result as stable, human-readable text, for golden
// tests and debugging.
func (r *Result) String() string {
	var b strings.Builder
	for _, ep := range r.Endpoints {
		fmt.Fprintf(&b, "endpoint %s %s iface=%s addrs=%v profiles=%v\n", ep.Kind, ep.Key, ep.Interface, ep.Addrs, ep.Profiles)
		for _, d := range []struct {
			name  string
			tiers []TierPolicies
		}{{"ingress", ep.Ingress}, {"egress", ep.Egress},
			{"forward-ingress", ep.ForwardIngress}, {"forward-egress", ep.ForwardEgress},
			{"prednat-ingress", ep.PreDNATIngress},
			{"untracked-ingress", ep.UntrackedIngress}, {"untracked-egress", ep.UntrackedEgress}} {
			for _, t := range d.tiers {
				fmt.Fprintf(&b, "  %s tier %s (default %s):", d.name, t.Tier, t.DefaultAction)
				for _, p := range t.Policies {
					fmt.Fprintf(&b, " %s", p)
				}
				b.WriteByte('\n')
			}
		}
	}
	ids := slicesSorted(r.Policies, func(id PolicyID) string { return id.String() })
	for _, id := range ids {
		p := r.Policies[id]
		fmt.Fprintf(&b, "policy %s\n", id)
		dumpRules(&b, "ingress", p.Ingress)
		dumpRules(&b, "egress", p.Egress)
	}
	for _, name := range slicesSorted(r.Profiles, func(s string) string { return s }) {
		p := r.Profiles[name]
		fmt.Fprintf(&b, "profile %s\n", name)
		dumpRules(&b, "ingress", p.Ingress)
		dumpRules(&b, "egress", p.Egress)
	}
	for _, id := range slicesSorted(r.IPSets, func(s string) string { return s }) {
		s := r.IPSets[id]
		fmt.Fprintf(&b, "ipset %s %s %v\n", id, s.Type, s.Members)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "problem %s\n", p)
	}
	for _, u := range r.Unrenderable {
		fmt.Fprintf(&b, "unrenderable %s\n", u)
	}
	return b.String()
}

func slicesSorted[K comparable, V any](m map[K]V, key func(K) string) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b K) int { return strings.Compare(key(a), key(b)) })
	return out
}

func dumpRules(b *strings.Builder, dir string, rules []Rule) {
	for _, r := range rules {
		fmt.Fprintf(b, "  %s %s", dir, r.Action)
		if r.IPVersion != 0 {
			fmt.Fprintf(b, " ipv%d", r.IPVersion)
		}
		if r.Protocol != 0 {
			fmt.Fprintf(b, " proto=%d", r.Protocol)
		}
		if r.NotProtocol != 0 {
			fmt.Fprintf(b, " !proto=%d", r.NotProtocol)
		}
		if r.ICMP != nil {
			fmt.Fprintf(b, " icmp=%d/%v", r.ICMP.Type, ptrStr(r.ICMP.Code))
		}
		if r.NotICMP != nil {
			fmt.Fprintf(b, " !icmp=%d/%v", r.NotICMP.Type, ptrStr(r.NotICMP.Code))
		}
		dumpEntity(b, "src", &r.Src)
		dumpEntity(b, "dst", &r.Dst)
		b.WriteByte('\n')
	}
}

func ptrStr(p *int) string {
	if p == nil {
		return "*"
	}
	return fmt.Sprint(*p)
}

func dumpEntity(b *strings.Builder, side string, e *EntityMatch) {
	field := func(name string, v any, present bool) {
		if present {
			fmt.Fprintf(b, " %s.%s=%v", side, name, v)
		}
	}
	field("nets", e.Nets, len(e.Nets) > 0)
	field("netSet", e.NetSet, e.NetSet != "")
	field("notNets", e.NotNets, len(e.NotNets) > 0)
	field("notNetSet", e.NotNetSet, e.NotNetSet != "")
	field("sel", e.SelSet, e.SelSet != "")
	field("notSel", e.NotSelSet, e.NotSelSet != "")
	field("ports", e.Ports, len(e.Ports) > 0)
	field("notPorts", e.NotPorts, len(e.NotPorts) > 0)
	field("namedPorts", e.NamedPortSets, len(e.NamedPortSets) > 0)
	field("notNamedPorts", e.NotNamedPortSets, len(e.NotNamedPortSets) > 0)
}
