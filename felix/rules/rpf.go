package rules

import "slices"

// WithWorkloadRPF returns rs with the reverse-path check on workload
// traffic in the raw table: a packet arriving from a workload interface
// whose source address would not be routed back out of that interface
// (a pod using another's address) is dropped before conntrack, as
// Calico's raw cali-PREROUTING does (`-m rpfilter --validmark --invert`).
// The rule goes right after the mark reset at the top of cali-PREROUTING,
// before workload packets leave the chain. rs is not modified.
func WithWorkloadRPF(rs *Ruleset, workloadPrefixes []string) *Ruleset {
	var rpf []Rule
	for _, p := range workloadPrefixes {
		rpf = append(rpf, Rule{Match: "-i " + p + "+ -m rpfilter --validmark --invert", Action: "-j DROP",
			Comment: "Drop workload packets whose source fails the reverse-path check."})
	}
	if len(rpf) == 0 {
		return rs
	}
	out := *rs
	out.Raw.Chains = slices.Clone(rs.Raw.Chains)
	for i, c := range out.Raw.Chains {
		if c.Name != ChainPrerouting || len(c.Rules) == 0 {
			continue
		}
		rules := append(append(append([]Rule{}, c.Rules[0]), rpf...), c.Rules[1:]...)
		out.Raw.Chains[i] = Chain{Name: c.Name, Rules: rules}
		return &out
	}
	return rs // no raw cali-PREROUTING rendered
}
