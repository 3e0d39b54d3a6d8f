package v3

import "strings"

// SplitMixedNets returns rules with each rule whose nets mix IPv4 and
// IPv6 (which Calico refuses on write: WriteRules) replaced by one rule
// per IP version, with ipVersion set and only that version's nets. The
// pair matches exactly what felix matches for the mixed rule, which it
// renders in each version's chains with that version's nets: a version
// with none of a side's positive nets has no rule, and an ICMP protocol
// keeps only its own version. Other rules are kept as they are (rules
// holds no mixed rule: rules itself).
//
// kube-controllers stores ClusterNetworkPolicies in etcd so (Calico's
// conversion, kept exactly on the Kubernetes datastore, writes one mixed
// rule for networks of both versions, which etcd's write checks refuse).
func SplitMixedNets(rules []Rule) []Rule {
	mixed := false
	for i := range rules {
		mixed = mixed || rules[i].mixesIPVersions()
	}
	if !mixed {
		return rules
	}
	out := make([]Rule, 0, len(rules)+1)
	for _, r := range rules {
		if !r.mixesIPVersions() {
			out = append(out, r)
			continue
		}
		for _, v := range []int{4, 6} {
			if s, ok := r.forIPVersion(v); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// mixesIPVersions reports whether r's nets hold both IPv4 and IPv6 ones.
func (r *Rule) mixesIPVersions() bool {
	seen := map[int]bool{}
	for _, l := range [][]string{r.Source.Nets, r.Source.NotNets, r.Destination.Nets, r.Destination.NotNets} {
		for _, n := range l {
			seen[netVersion(n)] = true
		}
	}
	return seen[4] && seen[6]
}

// forIPVersion is r for IP version v only; false when r cannot match a
// packet of that version.
func (r Rule) forIPVersion(v int) (Rule, bool) {
	if r.Protocol != nil && (r.Protocol.IsICMP() && v == 6 || r.Protocol.IsICMPv6() && v == 4) {
		return Rule{}, false
	}
	for _, e := range []*EntityRule{&r.Source, &r.Destination} {
		nets := versionNets(e.Nets, v)
		if len(e.Nets) > 0 && len(nets) == 0 {
			return Rule{}, false
		}
		e.Nets, e.NotNets = nets, versionNets(e.NotNets, v)
	}
	r.IPVersion = &v
	return r, true
}

func versionNets(nets []string, v int) []string {
	var out []string
	for _, n := range nets {
		if netVersion(n) == v {
			out = append(out, n)
		}
	}
	return out
}

// netVersion is 6 for an IPv6 net (or address), else 4.
func netVersion(n string) int {
	if strings.Contains(n, ":") {
		return 6
	}
	return 4
}
