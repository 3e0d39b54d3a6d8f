package v3

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

func TestBGPFilterValidate(t *testing.T) {
	accept, reject := BGPFilterActionAccept, BGPFilterActionReject
	tests := []struct {
		name string
		spec BGPFilterSpec
		want string
	}{
		{"accept a v4 prefix range", BGPFilterSpec{ExportV4: []BGPFilterRuleV4{{
			CIDR: "10.0.0.0/8", MatchOperator: MatchOperatorIn, Action: accept,
			PrefixLength: &BGPFilterPrefixLengthV4{Min: netPtr(int32(16)), Max: netPtr(int32(24))},
		}}}, ""},
		{"v6 CIDR in a v4 list", BGPFilterSpec{ExportV4: []BGPFilterRuleV4{{CIDR: "fd00::/8", MatchOperator: MatchOperatorIn, Action: accept}}},
			`spec.exportV4[0].cidr: "fd00::/8" is an IPv6 CIDR; this field takes IPv4`},
		{"v4 CIDR in a v6 list", BGPFilterSpec{ImportV6: []BGPFilterRuleV6{{CIDR: "10.0.0.0/8", MatchOperator: MatchOperatorIn, Action: accept}}},
			`spec.importV6[0].cidr: "10.0.0.0/8" is an IPv4 CIDR; this field takes IPv6`},
		{"cidr without operator", BGPFilterSpec{ExportV6: []BGPFilterRuleV6{{CIDR: "fd00::/8", Action: accept}}},
			"spec.exportV6[0].matchOperator: is required when cidr is set"},
		{"v6 prefix length 129", BGPFilterSpec{ExportV6: []BGPFilterRuleV6{{
			CIDR: "fd00::/8", MatchOperator: MatchOperatorIn, Action: accept,
			PrefixLength: &BGPFilterPrefixLengthV6{Max: netPtr(int32(129))},
		}}}, "spec.exportV6[0].prefixLength.max: 129 is outside 0-128 for IPv6"},
		{"min above max", BGPFilterSpec{ImportV4: []BGPFilterRuleV4{{
			CIDR: "10.0.0.0/8", MatchOperator: MatchOperatorIn, Action: accept,
			PrefixLength: &BGPFilterPrefixLengthV4{Min: netPtr(int32(28)), Max: netPtr(int32(24))},
		}}}, "spec.importV4[0].prefixLength: min 28 is greater than max 24"},
		{"operations on reject", BGPFilterSpec{ExportV4: []BGPFilterRuleV4{{
			Action: reject, Operations: []BGPFilterOperation{{SetPriority: &BGPFilterSetPriority{Value: 10}}},
		}}}, "spec.exportV4[0].operations: operations may only be used with action Accept"},
		{"empty operation", BGPFilterSpec{ExportV4: []BGPFilterRuleV4{{Action: accept, Operations: []BGPFilterOperation{{}}}}},
			"spec.exportV4[0].operations[0]: sets 0 operations; exactly one of"},
		{"prepend nothing", BGPFilterSpec{ExportV4: []BGPFilterRuleV4{{Action: accept, Operations: []BGPFilterOperation{{
			PrependASPath: &BGPFilterPrependASPath{Prefix: []numorstring.ASNumber{}},
		}}}}}, "spec.exportV4[0].operations[0].prependASPath.prefix: has 0 AS numbers"},
		{"two community values", BGPFilterSpec{ExportV4: []BGPFilterRuleV4{{Action: accept, Communities: &BGPFilterCommunityMatch{
			Values: []BGPCommunityValue{"1:1", "1:2"},
		}}}}, "spec.exportV4[0].communities.values: has 2 values"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &BGPFilter{ObjectMeta: metav1.ObjectMeta{Name: "filter"}, Spec: tc.spec}
			f.Default()
			err := f.Validate().Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
