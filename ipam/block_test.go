package ipam

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestAssignFromBlock(t *testing.T) {
	cidr := netip.MustParsePrefix("10.0.0.0/29")
	for _, tc := range []struct {
		name     string
		reserved []string
		pre      []int // ordinals released first (after allocating everything)
		n        int
		want     []netip.Addr
	}{
		{name: "lowest first", n: 3, want: addrs("10.0.0.0", "10.0.0.1", "10.0.0.2")},
		{name: "skips reserved", reserved: []string{"10.0.0.0/31", "10.0.0.3"}, n: 3, want: addrs("10.0.0.2", "10.0.0.4", "10.0.0.5")},
		{name: "stops at block end", n: 10, want: addrs("10.0.0.0", "10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7")},
		{name: "all reserved", reserved: []string{"10.0.0.0/29"}, n: 1, want: nil},
		{name: "released reused in release order", pre: []int{5, 2}, n: 2, want: addrs("10.0.0.5", "10.0.0.2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res Reservations
			for _, r := range tc.reserved {
				p, _ := parseIPOrCIDR(r)
				res = append(res, p)
			}
			b := NewBlock(cidr, "n1", metav1.Now())
			if tc.pre != nil {
				AssignFromBlock(b, 8, "old", nil, nil)
				ReleaseOrdinals(b, tc.pre)
			}
			got := AssignFromBlock(b, tc.n, "h1", map[string]string{AttrPod: "p"}, res)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("assigned (-want +got):\n%s", diff)
			}
			if probs := CheckBlock(b); len(probs) > 0 {
				t.Errorf("inconsistent block: %v", probs)
			}
			for _, ip := range got {
				o, _ := IPToOrdinal(cidr, ip)
				al, ok := AllocationAt(b, cidr, o)
				if !ok || al.Handle != "h1" || al.Attrs[AttrPod] != "p" {
					t.Errorf("%s: allocation %+v", ip, al)
				}
			}
		})
	}
}

func TestAttributesSharedAndCompacted(t *testing.T) {
	cidr := netip.MustParsePrefix("10.0.0.0/28")
	b := NewBlock(cidr, "n1", metav1.Now())
	AssignFromBlock(b, 2, "a", map[string]string{AttrPod: "a"}, nil)
	AssignFromBlock(b, 1, "b", map[string]string{AttrPod: "b"}, nil)
	AssignFromBlock(b, 1, "a", map[string]string{AttrPod: "a"}, nil)
	if len(b.Spec.Attributes) != 2 {
		t.Fatalf("want 2 attributes (shared by equal owners), got %d", len(b.Spec.Attributes))
	}
	if freed := ReleaseHandle(b, "a"); len(freed) != 3 {
		t.Fatalf("released %d addresses of a, want 3", len(freed))
	}
	if len(b.Spec.Attributes) != 1 || *b.Spec.Attributes[0].HandleID != "b" {
		t.Fatalf("attributes not compacted: %+v", b.Spec.Attributes)
	}
	if probs := CheckBlock(b); len(probs) > 0 {
		t.Fatal(probs)
	}
	al := Allocations(b)
	if len(al) != 1 || al[0].IP != netip.MustParseAddr("10.0.0.2") || al[0].Handle != "b" {
		t.Fatalf("remaining allocations %+v", al)
	}
	if ReleaseOrdinals(b, []int{2, 2, 9}); !IsEmpty(b) {
		t.Fatal("block not empty")
	}
	if probs := CheckBlock(b); len(probs) > 0 {
		t.Fatal(probs)
	}
}

func TestAssignOrdinal(t *testing.T) {
	cidr := netip.MustParsePrefix("fd00::/124")
	b := NewBlock(cidr, "", metav1.Now())
	if err := AssignOrdinal(b, netip.MustParseAddr("fd00::5"), "h", nil); err != nil {
		t.Fatal(err)
	}
	if err := AssignOrdinal(b, netip.MustParseAddr("fd00::5"), "h2", nil); err == nil {
		t.Fatal("second assignment of the same address succeeded")
	}
	got := AssignFromBlock(b, 6, "x", nil, nil)
	if diff := cmp.Diff(addrs("fd00::", "fd00::1", "fd00::2", "fd00::3", "fd00::4", "fd00::6"), got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Error(diff)
	}
	if probs := CheckBlock(b); len(probs) > 0 {
		t.Fatal(probs)
	}
}

func TestSequenceNumbers(t *testing.T) {
	b := NewBlock(netip.MustParsePrefix("10.0.0.0/30"), "n", metav1.Now())
	AssignFromBlock(b, 1, "a", nil, nil)
	first := Allocations(b)[0].Seq
	ReleaseOrdinals(b, []int{0})
	AssignOrdinal(b, netip.MustParseAddr("10.0.0.0"), "b", nil)
	if second := Allocations(b)[0].Seq; second == first {
		t.Fatalf("reassigned address kept sequence number %d", first)
	}
}

func TestCheckBlockFindsProblems(t *testing.T) {
	b := NewBlock(netip.MustParsePrefix("10.0.0.0/30"), "n", metav1.Now())
	AssignFromBlock(b, 1, "a", nil, nil)
	b.Spec.Unallocated = append(b.Spec.Unallocated, 0, 1)
	if probs := CheckBlock(b); len(probs) != 2 {
		t.Fatalf("want 2 problems (0 both allocated and free, 1 listed twice), got %v", probs)
	}
}
