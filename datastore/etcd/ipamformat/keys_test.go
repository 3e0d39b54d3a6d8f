package ipamformat

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestIPAMNames: v3 names and etcd keys of blocks and affinities map both
// ways, for IPv4 and IPv6 and node names with dashes and dots.
func TestIPAMNames(t *testing.T) {
	for _, tc := range []struct{ cidr, name, seg string }{
		{"10.1.54.64/26", "10-1-54-64-26", "10.1.54.64-26"},
		{"fd00:10:244::/122", "fd00-10-244---122", "fd00:10:244::-122"},
		{"fd00::1:0/122", "fd00--1-0-122", "fd00::1:0-122"},
		{"2001:db8:1:2:3:4:5:0/122", "2001-db8-1-2-3-4-5-0-122", "2001:db8:1:2:3:4:5:0-122"},
		{"::/122", "---122", "::-122"},
	} {
		p, err := ParseBlockName(tc.name)
		if err != nil || p.String() != tc.cidr {
			t.Errorf("ParseBlockName(%q) = %v, %v; want %s", tc.name, p, err, tc.cidr)
			continue
		}
		if BlockName(p) != tc.name || BlockKeySegment(p) != tc.seg {
			t.Errorf("%s: name %q segment %q, want %q %q", tc.cidr, BlockName(p), BlockKeySegment(p), tc.name, tc.seg)
		}
		if q, err := ParseBlockKeySegment(tc.seg); err != nil || q != p {
			t.Errorf("ParseBlockKeySegment(%q) = %v, %v", tc.seg, q, err)
		}
	}
	for _, bad := range []string{"10-1-54-64", "10-1-54-65-26", "1-2-3-4-5-26", "x", "::ffff-1-2-3-4-128", "10-1-054-64-26"} {
		if p, err := ParseBlockName(bad); err == nil {
			t.Errorf("ParseBlockName(%q) = %v, want an error", bad, p)
		}
	}
	// An affinity name stands for each split whose tail is a block name,
	// in both type folders.
	got := AffinityKeyCandidates("node-1.example-10-1-54-64-26")
	want := []string{
		"/calico/ipam/v2/host/node-1.example/ipv4/block/10.1.54.64-26",
		"/calico/ipam/v2/virtual/node-1.example/ipv4/block/10.1.54.64-26",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("candidates (-want +got):\n%s", d)
	}
	// IPv6 with "::" can split two ways: both are candidates.
	got = AffinityKeyCandidates("n-1-1---128")
	want = []string{
		"/calico/ipam/v2/host/n/ipv6/block/1:1::-128", "/calico/ipam/v2/virtual/n/ipv6/block/1:1::-128",
		"/calico/ipam/v2/host/n-1/ipv6/block/1::-128", "/calico/ipam/v2/virtual/n-1/ipv6/block/1::-128",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ambiguous candidates (-want +got):\n%s", d)
	}
}
