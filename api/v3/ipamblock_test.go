package v3

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// netBlock returns a valid /30 block with ordinal 1 allocated.
func netBlock() *IPAMBlock {
	return &IPAMBlock{
		ObjectMeta: metav1.ObjectMeta{Name: "10-0-0-0-30"},
		Spec: IPAMBlockSpec{
			CIDR:                        "10.0.0.0/30",
			Affinity:                    netPtr("host:node-1"),
			Allocations:                 []*int{nil, netPtr(0), nil, nil},
			Unallocated:                 []int{0, 2, 3},
			Attributes:                  []AllocationAttribute{{HandleID: netPtr("h1")}},
			SequenceNumberForAllocation: map[string]uint64{"1": 3},
		},
	}
}

func TestIPAMBlockSize(t *testing.T) {
	tests := []struct {
		cidr string
		want int
	}{
		{"10.0.0.0/26", 64},
		{"10.0.0.0/32", 1},
		{"10.0.0.0/20", 4096},
		{"fd00::/122", 64},
		{"fd00::/64", 0},
		{"garbage", 0},
	}
	for _, tc := range tests {
		b := &IPAMBlock{Spec: IPAMBlockSpec{CIDR: tc.cidr}}
		if got := b.Size(); got != tc.want {
			t.Errorf("Size(%s) = %d, want %d", tc.cidr, got, tc.want)
		}
	}
}

func TestIPAMBlockValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *IPAMBlock)
		want   string
	}{
		{"valid", func(b *IPAMBlock) {}, ""},
		{"too few allocations", func(b *IPAMBlock) { b.Spec.Allocations = b.Spec.Allocations[:3] },
			"spec.allocations: has 3 entries; a 10.0.0.0/30 block needs exactly 4"},
		{"attribute index out of range", func(b *IPAMBlock) { b.Spec.Allocations[3] = netPtr(1); b.Spec.Unallocated = []int{0, 2} },
			"spec.allocations[3]: attribute index 1 is outside 0-0"},
		{"free ordinal in use", func(b *IPAMBlock) { b.Spec.Unallocated = append(b.Spec.Unallocated, 1) },
			"spec.unallocated[3]: ordinal 1 is listed as free but allocations[1] is in use"},
		{"free ordinal out of range", func(b *IPAMBlock) { b.Spec.Unallocated = append(b.Spec.Unallocated, 4) },
			"spec.unallocated[3]: ordinal 4 is outside 0-3"},
		{"free ordinal twice", func(b *IPAMBlock) { b.Spec.Unallocated = append(b.Spec.Unallocated, 2) },
			"spec.unallocated[3]: ordinal 2 is listed more than once"},
		{"bad sequence key", func(b *IPAMBlock) { b.Spec.SequenceNumberForAllocation["x"] = 1 },
			`spec.sequenceNumberForAllocation["x"]: key "x" is not an ordinal`},
		{"bad affinity", func(b *IPAMBlock) { b.Spec.Affinity = netPtr("node-1") },
			`spec.affinity: "node-1" is not host:<node> or virtual:<name>`},
		{"block too big", func(b *IPAMBlock) { b.Spec.CIDR = "10.0.0.0/16" }, "spec.cidr: /16 is outside 20-32 for an IPv4 block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := netBlock()
			tc.mutate(b)
			b.Default()
			err := b.Validate().Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
