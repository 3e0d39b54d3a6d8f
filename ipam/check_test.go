package ipam

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestCheck plants each finding Check reports in a fake store and checks
// the sentences: overlapping pools and their blocks, a block outside every
// pool, a handle whose counts disagree, an allocation without a handle, an
// endpoint using an address IPAM never gave out.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	s, a := newFake(t, pool("p", "10.0.0.0/24", 28), pool("gone", "10.9.0.0/24", 28))
	args := podArgs("n1", "a", 1, 0)
	args.IPv4Pools = []string{"p"}
	in := mustAssign(t, a, args)[0]
	out := mustAssign(t, a, AutoAssignArgs{Num4: 1, HandleID: "k8s-pod-network.out", Hostname: "n1", IPv4Pools: []string{"gone"}})[0]
	// The pool goes (raw, as an old tool would), its block in use stays.
	if _, err := s.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "gone"}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A handle miscounting its block, one missing, an overlapping pool.
	h := must(s.Get(ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: "k8s-pod-network.a"})).(*v3.IPAMHandle)
	h.Spec.Block[BlockFor(in, 28).String()] = 2
	must(s.Update(ctx, h))
	must(s.Delete(ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: "k8s-pod-network.out"}, datastore.DeleteOptions{}))
	mustCreate(t, s, pool("big", "10.0.0.0/16", 26), wep("default", "stray", "n1", netip.MustParseAddr("10.0.0.200")))

	var ci CheckInput
	for kind, into := range map[string]**datastore.List{v3.KindIPAMBlock: &ci.Blocks, v3.KindIPAMHandle: &ci.Handles,
		v3.KindWorkloadEndpoint: &ci.Endpoints, v3.KindIPPool: &ci.Pools} {
		*into = must(s.List(ctx, kind, datastore.ListOptions{}))
	}
	got := Check(ci)
	outBlock := BlockFor(out, 28)
	want := Findings{
		Inconsistencies: []string{
			"handle k8s-pod-network.a records 2 address(es) in block " + BlockFor(in, 28).String() + ", the block holds 1",
			"handle k8s-pod-network.out is used by allocations but has no IPAMHandle",
			"workload endpoint default/n1-k8s-stray-eth0 uses 10.0.0.200, which IPAM has not allocated",
		},
		Overlaps:     []string{"IPPool(p) CIDR overlaps with IPPool(big) CIDR 10.0.0.0/16"},
		OutsidePools: []string{"block " + outBlock.String() + " (affinity host:n1) is in no IP pool and holds 1 address(es)"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Check (-want +got):\n%s", d)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
