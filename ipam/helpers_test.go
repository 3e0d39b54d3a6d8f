package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

func pool(name, cidr string, blockSize int) *v3.IPPool {
	return &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v3.IPPoolSpec{CIDR: cidr, BlockSize: blockSize},
	}
}

func ipamConfig(strict bool) *v3.IPAMConfiguration {
	return &v3.IPAMConfiguration{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPAMConfiguration, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v3.IPAMConfigurationSpec{StrictAffinity: strict},
	}
}

func reservation(name string, cidrs ...string) *v3.IPReservation {
	return &v3.IPReservation{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPReservation, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v3.IPReservationSpec{ReservedCIDRs: cidrs},
	}
}

func mustCreate(t testing.TB, c datastore.Client, rs ...v3.Resource) {
	t.Helper()
	for _, r := range rs {
		if _, err := c.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func podArgs(node, pod string, n4, n6 int) AutoAssignArgs {
	return AutoAssignArgs{
		Num4: n4, Num6: n6, HandleID: "k8s-pod-network." + pod, Hostname: node,
		Attrs: map[string]string{AttrNamespace: "default", AttrPod: pod, AttrNode: node},
	}
}

// snapshot is the full IPAM state of a store, checked for consistency.
type snapshot struct {
	byIP       map[netip.Addr]string // address -> handle
	blocks     map[netip.Prefix]*v3.IPAMBlock
	affinities map[netip.Prefix][]*v3.BlockAffinity
	handles    map[string]map[string]int
}

// checkStore reads everything and verifies IPAM's invariants: every block
// is internally consistent, no address is allocated twice, handle counts
// equal the allocations per block, a confirmed affinity matches its block's
// affinity and no block has two owners.
func checkStore(t testing.TB, c datastore.Client) snapshot {
	t.Helper()
	return checkStoreOpts(t, c, true)
}

// checkStoreOpts is checkStore; without strictHandles, handle records
// may disagree with the blocks (a release that failed between its block
// write and its handle write leaves a stale count, repaired later).
func checkStoreOpts(t testing.TB, c datastore.Client, strictHandles bool) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{byIP: map[netip.Addr]string{}, blocks: map[netip.Prefix]*v3.IPAMBlock{}, affinities: map[netip.Prefix][]*v3.BlockAffinity{}, handles: map[string]map[string]int{}}
	bl, err := c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]map[string]int{}
	for _, r := range bl.Items {
		b := r.(*v3.IPAMBlock)
		cidr := netip.MustParsePrefix(b.Spec.CIDR)
		if b.Name != BlockName(cidr) {
			t.Errorf("block %s stored as %s", cidr, b.Name)
		}
		for _, p := range CheckBlock(b) {
			t.Errorf("block accounting: %s", p)
		}
		s.blocks[cidr] = b
		for _, al := range Allocations(b) {
			if h, dup := s.byIP[al.IP]; dup {
				t.Errorf("DUPLICATE: %s held by %s and %s", al.IP, h, al.Handle)
			}
			s.byIP[al.IP] = al.Handle
			if counts[al.Handle] == nil {
				counts[al.Handle] = map[string]int{}
			}
			counts[al.Handle][cidr.String()]++
		}
	}
	hl, err := c.List(ctx, v3.KindIPAMHandle, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range hl.Items {
		h := r.(*v3.IPAMHandle)
		s.handles[h.Spec.HandleID] = h.Spec.Block
	}
	for h, want := range counts {
		if !strictHandles {
			break
		}
		if got := s.handles[h]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("handle %s counts %v, allocations say %v", h, got, want)
		}
	}
	for h, got := range s.handles {
		if strictHandles && counts[h] == nil {
			t.Errorf("LEAKED handle %s %v has no allocations", h, got)
		}
	}
	al, err := c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range al.Items {
		ba := r.(*v3.BlockAffinity)
		cidr := netip.MustParsePrefix(ba.Spec.CIDR)
		s.affinities[cidr] = append(s.affinities[cidr], ba)
		if ba.Spec.State == v3.BlockAffinityStateConfirmed {
			b := s.blocks[cidr]
			if b == nil || b.Spec.Affinity == nil || *b.Spec.Affinity != AffinityValue(ba.Spec.Node) {
				t.Errorf("confirmed affinity of %s to %s but the block says otherwise", cidr, ba.Spec.Node)
			}
		}
	}
	for cidr, as := range s.affinities {
		confirmed := 0
		for _, a := range as {
			if a.Spec.State == v3.BlockAffinityStateConfirmed {
				confirmed++
			}
		}
		if confirmed > 1 {
			t.Errorf("block %s has %d confirmed owners", cidr, confirmed)
		}
	}
	return s
}

func mustAssign(t testing.TB, a *Allocator, args AutoAssignArgs) []netip.Addr {
	t.Helper()
	ips, err := a.AutoAssign(context.Background(), args)
	if err != nil {
		t.Fatalf("AutoAssign %s: %v", args.HandleID, err)
	}
	return ips
}

func newFake(t testing.TB, rs ...v3.Resource) (*ipamtest.Store, *Allocator) {
	t.Helper()
	s := ipamtest.NewStore()
	mustCreate(t, s, rs...)
	return s, New(s, Config{})
}

var errBoom = errors.New("boom")

func metaNamed(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: n} }

// singleReads hides a Client's ReadMany: reads go through
// datastore.ReadMany's fallback of separate Gets and Lists.
type singleReads struct{ datastore.Client }
