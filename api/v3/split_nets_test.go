package v3

import (
	"reflect"
	"testing"

	"github.com/tabbynet/tabby/api/numorstring"
)

// TestSplitMixedNets: a rule mixing IPv4 and IPv6 nets becomes one rule
// per version felix would match it in (each with only its nets and
// ipVersion set), valid for writing; other rules stay as they are.
func TestSplitMixedNets(t *testing.T) {
	v4, v6 := 4, 6
	icmp := numorstring.ProtocolFromString("ICMP")
	keep := Rule{Action: Allow, Destination: EntityRule{Nets: []string{"10.0.0.0/8"}}}
	tests := []struct {
		name string
		in   []Rule
		want []Rule
	}{
		{"nothing mixed", []Rule{keep}, []Rule{keep}},
		{"both versions' networks (a CNP's 0.0.0.0/0 and ::/0)",
			[]Rule{keep, {Action: Deny, Destination: EntityRule{Nets: []string{"0.0.0.0/0", "::/0"}}}},
			[]Rule{keep, {Action: Deny, IPVersion: &v4, Destination: EntityRule{Nets: []string{"0.0.0.0/0"}}},
				{Action: Deny, IPVersion: &v6, Destination: EntityRule{Nets: []string{"::/0"}}}}},
		{"a side with only IPv4 nets: no IPv6 rule",
			[]Rule{{Action: Allow, Source: EntityRule{Nets: []string{"10.0.0.0/8"}}, Destination: EntityRule{NotNets: []string{"fd00::/8", "10.1.0.0/16"}}}},
			[]Rule{{Action: Allow, IPVersion: &v4, Source: EntityRule{Nets: []string{"10.0.0.0/8"}}, Destination: EntityRule{NotNets: []string{"10.1.0.0/16"}}}}},
		{"only notNets mixed: both versions",
			[]Rule{{Action: Allow, Destination: EntityRule{NotNets: []string{"10.0.0.0/8", "fd00::/8"}}}},
			[]Rule{{Action: Allow, IPVersion: &v4, Destination: EntityRule{NotNets: []string{"10.0.0.0/8"}}},
				{Action: Allow, IPVersion: &v6, Destination: EntityRule{NotNets: []string{"fd00::/8"}}}}},
		{"ICMP: IPv4 only",
			[]Rule{{Action: Allow, Protocol: &icmp, Destination: EntityRule{Nets: []string{"10.0.0.0/8", "fd00::/8"}}}},
			[]Rule{{Action: Allow, Protocol: &icmp, IPVersion: &v4, Destination: EntityRule{Nets: []string{"10.0.0.0/8"}}}}},
	}
	for _, tc := range tests {
		got := SplitMixedNets(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
		for i := range got {
			var errs ErrorList
			got[i].writeRules(Path("r"), &errs)
			if len(errs) > 0 {
				t.Errorf("%s: rule %d refused on write: %v", tc.name, i, errs)
			}
		}
	}
}
