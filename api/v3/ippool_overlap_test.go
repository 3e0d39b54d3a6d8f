package v3

import (
	"testing"
)

func TestIPPoolOverlapAndUpdateErrors(t *testing.T) {
	mk := func(name, cidr string, bs int) *IPPool {
		p := &IPPool{Spec: IPPoolSpec{CIDR: cidr, BlockSize: bs}}
		p.Name = name
		p.Default()
		return p
	}
	big := mk("big", "10.50.0.0/20", 24)
	others := []*IPPool{big, mk("v6", "fd00::/64", 122), mk("broken", "nonsense", 26)}
	tests := []struct {
		name string
		got  ErrorList
		want string
	}{
		{"overlap names both", IPPoolOverlapErrors(mk("small", "10.50.0.0/24", 28), others),
			"spec.cidr: IPPool(small) CIDR overlaps with IPPool(big) CIDR 10.50.0.0/20"},
		{"containing", IPPoolOverlapErrors(mk("all", "10.0.0.0/8", 26), others),
			"spec.cidr: IPPool(all) CIDR overlaps with IPPool(big) CIDR 10.50.0.0/20"},
		{"adjacent", IPPoolOverlapErrors(mk("next", "10.50.16.0/20", 24), others), ""},
		{"itself", IPPoolOverlapErrors(mk("big", "10.50.0.0/20", 24), others), ""},
		{"blocks of another size", IPPoolBlockSizeErrors(mk("p", "10.50.0.0/16", 26), []string{"10.50.3.0/24"}),
			"spec.blockSize: IPPool blocksSize conflicts with existing allocations that use a different blockSize"},
		{"blocks of the same size", IPPoolBlockSizeErrors(mk("p", "10.50.0.0/16", 24), []string{"10.50.3.0/24", "fd00::/122"}), ""},
		{"blocks elsewhere", IPPoolBlockSizeErrors(mk("p", "10.50.0.0/16", 26), []string{"10.60.0.0/24"}), ""},
		{"cidr changed", IPPoolUpdateErrors(big, mk("big", "10.50.0.0/16", 24)), "spec.cidr: IPPool CIDR cannot be modified"},
		{"cidr rewritten", IPPoolUpdateErrors(mk("x", "fd00:0::/64", 122), mk("x", "fd00::/64", 122)), ""},
		{"block size changed", IPPoolUpdateErrors(big, mk("big", "10.50.0.0/20", 26)), "spec.blockSize: IPPool BlockSize cannot be modified"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if len(tc.got) > 0 {
				got = tc.got.Error()
			}
			if tc.want == "" && got != "" || tc.want != "" && (len(got) < len(tc.want) || got[:len(tc.want)] != tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
