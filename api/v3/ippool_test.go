package v3

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func netPtr[T any](v T) *T { return &v }

func TestIPPoolDefault(t *testing.T) {
	tests := []struct {
		name string
		in   IPPoolSpec
		want IPPoolSpec
	}{{
		name: "IPv4 pool gets Calico's defaults",
		in:   IPPoolSpec{CIDR: "10.0.0.0/16"},
		want: IPPoolSpec{
			CIDR: "10.0.0.0/16", BlockSize: 26, IPIPMode: IPIPModeNever, VXLANMode: VXLANModeNever,
			NodeSelector: "all()", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseWorkload, IPPoolAllowedUseTunnel},
			AssignmentMode: netPtr(AssignmentModeAutomatic),
		},
	}, {
		name: "IPv6 pool gets block size 122 and a canonical CIDR",
		in:   IPPoolSpec{CIDR: "fd00:0:0::/64"},
		want: IPPoolSpec{
			CIDR: "fd00::/64", BlockSize: 122, IPIPMode: IPIPModeNever, VXLANMode: VXLANModeNever,
			NodeSelector: "all()", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseWorkload, IPPoolAllowedUseTunnel},
			AssignmentMode: netPtr(AssignmentModeAutomatic),
		},
	}, {
		name: "set fields are kept",
		in: IPPoolSpec{
			CIDR: "10.0.0.0/16", BlockSize: 28, IPIPMode: IPIPModeAlways, VXLANMode: VXLANModeNever,
			NodeSelector: "rack == 'a'", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseLoadBalancer},
			AssignmentMode: netPtr(AssignmentModeManual),
		},
		want: IPPoolSpec{
			CIDR: "10.0.0.0/16", BlockSize: 28, IPIPMode: IPIPModeAlways, VXLANMode: VXLANModeNever,
			NodeSelector: "rack == 'a'", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseLoadBalancer},
			AssignmentMode: netPtr(AssignmentModeManual),
		},
	}, {
		name: "host bits are not silently cleared",
		in:   IPPoolSpec{CIDR: "10.0.0.1/16"},
		want: IPPoolSpec{
			CIDR: "10.0.0.1/16", BlockSize: 26, IPIPMode: IPIPModeNever, VXLANMode: VXLANModeNever,
			NodeSelector: "all()", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseWorkload, IPPoolAllowedUseTunnel},
			AssignmentMode: netPtr(AssignmentModeAutomatic),
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &IPPool{Spec: tc.in}
			p.Default()
			if d := cmp.Diff(tc.want, p.Spec); d != "" {
				t.Errorf("Default (-want +got):\n%s", d)
			}
		})
	}
}

func TestIPPoolValidate(t *testing.T) {
	tests := []struct {
		name string
		spec IPPoolSpec
		want string // substring of the error; "" means valid
	}{
		{"valid IPv4", IPPoolSpec{CIDR: "10.0.0.0/16"}, ""},
		{"valid IPv6 /116 blocks", IPPoolSpec{CIDR: "fd00::/100", BlockSize: 116}, ""},
		{"block size 33", IPPoolSpec{CIDR: "10.0.0.0/16", BlockSize: 33}, "spec.blockSize: 33 is outside 20-32 for an IPv4 pool"},
		{"block size 19", IPPoolSpec{CIDR: "10.0.0.0/16", BlockSize: 19}, "spec.blockSize: 19 is outside 20-32 for an IPv4 pool"},
		{"IPv6 block size 129", IPPoolSpec{CIDR: "fd00::/64", BlockSize: 129}, "spec.blockSize: 129 is outside 116-128 for an IPv6 pool"},
		{"pool smaller than a block", IPPoolSpec{CIDR: "10.0.0.0/27"}, "is smaller than one /26 block"},
		{"disabled pool may be smaller than a block", IPPoolSpec{CIDR: "10.0.0.0/27", Disabled: true}, ""},
		{"pool exactly one block", IPPoolSpec{CIDR: "10.0.0.0/26"}, ""},
		{"host bits", IPPoolSpec{CIDR: "10.0.0.1/16"}, `spec.cidr: "10.0.0.1/16" is not strictly masked`},
		{"bare IP", IPPoolSpec{CIDR: "10.0.0.1"}, "is not a valid CIDR"},
		{"link-local v4 inside", IPPoolSpec{CIDR: "169.254.10.0/24"}, "overlaps the IPv4 link-local range"},
		{"link-local v4 containing", IPPoolSpec{CIDR: "169.0.0.0/8"}, "overlaps the IPv4 link-local range"},
		{"link-local v6", IPPoolSpec{CIDR: "fe80::/64"}, "overlaps the IPv6 link-local range"},
		{"both encapsulations", IPPoolSpec{CIDR: "10.0.0.0/16", IPIPMode: IPIPModeAlways, VXLANMode: VXLANModeCrossSubnet}, "cannot enable both VXLAN"},
		{"IPIP on IPv6", IPPoolSpec{CIDR: "fd00::/64", IPIPMode: IPIPModeCrossSubnet}, "spec.ipipMode: CrossSubnet is not supported on an IPv6 pool"},
		{"VXLAN on IPv6", IPPoolSpec{CIDR: "fd00::/64", VXLANMode: VXLANModeAlways}, ""},
		{"LoadBalancer alone", IPPoolSpec{CIDR: "10.0.0.0/24", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseLoadBalancer}}, ""},
		{"LoadBalancer with Tunnel", IPPoolSpec{CIDR: "10.0.0.0/24", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseTunnel, IPPoolAllowedUseLoadBalancer}}, "LoadBalancer cannot be combined with Tunnel"},
		{"LoadBalancer with VXLAN", IPPoolSpec{CIDR: "10.0.0.0/24", VXLANMode: VXLANModeAlways, AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseLoadBalancer}}, "cannot have IPIP or VXLAN enabled"},
		{"LoadBalancer with node selector", IPPoolSpec{CIDR: "10.0.0.0/24", NodeSelector: "rack == 'a'", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseLoadBalancer}}, "spec.nodeSelector: must be all() for a LoadBalancer pool"},
		{"LoadBalancer without export", IPPoolSpec{CIDR: "10.0.0.0/24", DisableBGPExport: true, AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseLoadBalancer}}, "spec.disableBGPExport: must be false"},
		{"repeated use", IPPoolSpec{CIDR: "10.0.0.0/24", AllowedUses: []IPPoolAllowedUse{IPPoolAllowedUseWorkload, IPPoolAllowedUseWorkload}}, "spec.allowedUses[1]: Workload is listed more than once"},
		{"bad selector", IPPoolSpec{CIDR: "10.0.0.0/24", NamespaceSelector: "a =="}, "spec.namespaceSelector: invalid selector"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &IPPool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: tc.spec}
			p.Default()
			err := p.Validate().Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCIDRsOverlap(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"10.0.0.0/16", "10.0.1.0/24", true},
		{"10.0.1.0/24", "10.0.0.0/16", true},
		{"10.0.0.0/24", "10.0.1.0/24", false},
		{"10.0.0.0/24", "10.0.0.0/24", true},
		{"10.0.0.5", "10.0.0.0/24", true},
		{"fd00::/64", "fd00::1/128", true},
		{"fd00::/64", "fd01::/64", false},
		{"0.0.0.0/0", "::/0", false},
	}
	for _, tc := range tests {
		t.Run(tc.a+" "+tc.b, func(t *testing.T) {
			got, err := CIDRsOverlap(tc.a, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("CIDRsOverlap = %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := CIDRsOverlap("10.0.0.0/33", "10.0.0.0/8"); err == nil {
		t.Error("CIDRsOverlap accepted an invalid CIDR")
	}
	a := &IPPool{Spec: IPPoolSpec{CIDR: "10.0.0.0/16"}}
	b := &IPPool{Spec: IPPoolSpec{CIDR: "10.0.128.0/17"}}
	c := &IPPool{Spec: IPPoolSpec{CIDR: "nonsense"}}
	if !PoolsOverlap(a, b) || PoolsOverlap(a, c) {
		t.Error("PoolsOverlap gave the wrong answer")
	}
}
