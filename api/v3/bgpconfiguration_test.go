package v3

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

func TestBGPConfigurationDefault(t *testing.T) {
	enabled := ServiceLoadBalancerAggregationEnabled
	tests := []struct {
		name string
		in   BGPConfiguration
		want BGPConfigurationSpec
	}{{
		name: "the default object gets the cluster-wide defaults",
		in:   BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		want: BGPConfigurationSpec{
			LogSeverityScreen: "Info", NodeToNodeMeshEnabled: netPtr(true),
			ASNumber: netPtr(numorstring.ASNumber(64512)), ListenPort: 179,
			ServiceLoadBalancerAggregation: &enabled,
		},
	}, {
		name: "a per-node object inherits, so only CRD defaults apply",
		in:   BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "node.worker-1"}},
		want: BGPConfigurationSpec{LogSeverityScreen: "Info", ServiceLoadBalancerAggregation: &enabled},
	}, {
		name: "set values are kept",
		in: BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: BGPConfigurationSpec{
			LogSeverityScreen: "Debug", NodeToNodeMeshEnabled: netPtr(false),
			ASNumber: netPtr(numorstring.ASNumber(65000)), ListenPort: 1179,
		}},
		want: BGPConfigurationSpec{
			LogSeverityScreen: "Debug", NodeToNodeMeshEnabled: netPtr(false),
			ASNumber: netPtr(numorstring.ASNumber(65000)), ListenPort: 1179,
			ServiceLoadBalancerAggregation: &enabled,
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			c.Default()
			if d := cmp.Diff(tc.want, c.Spec); d != "" {
				t.Errorf("Default (-want +got):\n%s", d)
			}
		})
	}
}

func TestCheckCommunity(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"65000:100", true},
		{"0:0", true},
		{"65535:65535", true},
		{"65536:1", false},
		{"1:65536", false},
		{"4294967295:4294967295:4294967295", true},
		{"4294967296:1:1", false},
		{"1:2:3:4", false},
		{"100", false},
		{"a:b", false},
		{"-1:5", false},
		{":5", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			err := netCheckCommunity(tc.in)
			if (err == nil) != tc.ok {
				t.Errorf("netCheckCommunity(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
		})
	}
}

func TestBGPConfigurationValidate(t *testing.T) {
	tests := []struct {
		name    string
		objName string
		spec    BGPConfigurationSpec
		want    string
	}{
		{"literal and named communities", "default", BGPConfigurationSpec{
			Communities:          []Community{{Name: "tag", Value: "65000:1"}},
			PrefixAdvertisements: []PrefixAdvertisement{{CIDR: "10.0.0.0/8", Communities: []string{"tag", "65000:2", "1:2:3"}}},
		}, ""},
		{"undefined community name", "default", BGPConfigurationSpec{
			PrefixAdvertisements: []PrefixAdvertisement{{CIDR: "10.0.0.0/8", Communities: []string{"missing"}}},
		}, `spec.prefixAdvertisements[0].communities[0]: "missing" is neither a community defined in spec.communities nor a value`},
		{"unused communities", "default", BGPConfigurationSpec{
			Communities: []Community{{Name: "tag", Value: "65000:1"}},
		}, "spec.communities: communities are defined but no prefixAdvertisements use them"},
		{"AS number on a node object", "node.a", BGPConfigurationSpec{ASNumber: netPtr(numorstring.ASNumber(1))},
			`spec.asNumber: can only be set on the BGPConfiguration named "default"`},
		{"mesh restart time without mesh", "default", BGPConfigurationSpec{
			NodeToNodeMeshEnabled: netPtr(false), NodeMeshMaxRestartTime: &metav1.Duration{},
		}, "spec.nodeMeshMaxRestartTime: cannot be set when nodeToNodeMeshEnabled is false"},
		{"log level is case-insensitive", "default", BGPConfigurationSpec{LogSeverityScreen: "WARNING"}, ""},
		{"route priority 0", "default", BGPConfigurationSpec{IPv4NormalRoutePriority: netPtr(0)}, "spec.ipv4NormalRoutePriority: 0 is outside 1-2147483646"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &BGPConfiguration{ObjectMeta: metav1.ObjectMeta{Name: tc.objName}, Spec: tc.spec}
			c.Default()
			err := c.Validate().Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
