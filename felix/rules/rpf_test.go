package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithWorkloadRPF(t *testing.T) {
	in := &Ruleset{IPVersion: 4, Raw: TableRules{Chains: []Chain{
		{Name: ChainRawOutput, Rules: []Rule{{Action: "-j X"}}},
		{Name: ChainPrerouting, Rules: []Rule{{Action: "-j MARK --set-xmark 0x0/0x30000"}, {Match: "-i cali+", Action: "-j RETURN"}}},
	}}}
	got := WithWorkloadRPF(in, []string{"cali", "tap"})
	want := []Rule{
		{Action: "-j MARK --set-xmark 0x0/0x30000"},
		{Match: "-i cali+ -m rpfilter --validmark --invert", Action: "-j DROP", Comment: "Drop workload packets whose source fails the reverse-path check."},
		{Match: "-i tap+ -m rpfilter --validmark --invert", Action: "-j DROP", Comment: "Drop workload packets whose source fails the reverse-path check."},
		{Match: "-i cali+", Action: "-j RETURN"},
	}
	if diff := cmp.Diff(want, got.Raw.Chains[1].Rules); diff != "" {
		t.Errorf("raw cali-PREROUTING (-want +got):\n%s", diff)
	}
	if len(in.Raw.Chains[1].Rules) != 2 {
		t.Error("the input ruleset was modified")
	}
}
