package ipam

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func nodeObj(name string) *v3.Node {
	return &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func wep(ns, pod, node string, ips ...netip.Addr) *v3.WorkloadEndpoint {
	w := &v3.WorkloadEndpoint{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: node + "-k8s-" + pod + "-eth0", Namespace: ns},
		Spec:       v3.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: pod, Endpoint: "eth0", InterfaceName: "cali" + pod},
	}
	for _, ip := range ips {
		w.Spec.IPNetworks = append(w.Spec.IPNetworks, netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	return w
}

// TestGCReleasesExactlyTheDead kills owners (endpoints, a node) and checks
// GC frees exactly their addresses, never a live one, and that an owner
// coming back between check and release saves its address.
func TestGCReleasesExactlyTheDead(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 28), nodeObj("n1"), nodeObj("n2"))
	ctx := context.Background()
	live := map[string][]netip.Addr{}
	for _, p := range []string{"a", "b", "c", "d"} {
		ips := mustAssign(t, a, podArgs("n1", p, 1, 0))
		live[p] = ips
		mustCreate(t, s, wep("default", p, "n1", ips...))
	}
	n2ips := mustAssign(t, a, podArgs("n2", "e", 1, 0))
	mustCreate(t, s, wep("default", "e", "n2", n2ips...))
	// A tunnel address of n2 (node attribute only).
	tun := mustAssign(t, a, AutoAssignArgs{Num4: 1, HandleID: "ipip-tunnel-addr-n2", Hostname: "n2", Attrs: map[string]string{AttrNode: "n2", AttrType: "ipipTunnelAddress"}})
	// A pod being set up: no endpoint yet, but its handle is fresh.
	clock := time.Now().Add(time.Minute)
	s.Now = func() time.Time { return clock }
	mustAssign(t, a, podArgs("n1", "starting", 1, 0))

	// Kill b and d's endpoints and node n2 (with e's endpoint).
	for _, p := range []string{"b", "d"} {
		if _, err := s.Delete(ctx, datastore.KeyOf(wep("default", p, "n1")), datastore.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.Delete(ctx, datastore.KeyOf(wep("default", "e", "n2")), datastore.DeleteOptions{})
	s.Delete(ctx, datastore.Key{Kind: v3.KindNode, Name: "n2"}, datastore.DeleteOptions{})

	a.cfg.Now = func() time.Time { return clock }
	rep, err := a.CheckLeaks(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range rep.Leaks {
		got = append(got, l.Handle)
	}
	slices.Sort(got)
	want := []string{"ipip-tunnel-addr-n2", "k8s-pod-network.b", "k8s-pod-network.d", "k8s-pod-network.e"}
	if !slices.Equal(got, want) {
		t.Fatalf("leaks %v, want %v", got, want)
	}
	if !slices.Equal(rep.DeadNodes, []string{"n2"}) {
		t.Fatalf("dead nodes %v", rep.DeadNodes)
	}
	// Pod d comes back (same address) before the release: spared.
	mustCreate(t, s, wep("default", "d", "n1", live["d"]...))
	freed, err := a.ReleaseLeaks(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(freed) != 3 {
		t.Fatalf("freed %v", freed)
	}
	snap := checkStore(t, s)
	for _, p := range []string{"a", "c", "d", "starting"} {
		if _, ok := snap.handles["k8s-pod-network."+p]; !ok {
			t.Errorf("live pod %s lost its address", p)
		}
	}
	for _, ip := range append(live["b"], append(n2ips, tun...)...) {
		if _, ok := snap.byIP[ip]; ok {
			t.Errorf("leaked %s not freed", ip)
		}
	}
	for _, b := range snap.blocks {
		if b.Spec.Affinity != nil && *b.Spec.Affinity == "host:n2" {
			t.Error("dead node n2 still owns a block")
		}
	}
	for _, as := range snap.affinities {
		for _, ba := range as {
			if ba.Spec.Node == "n2" {
				t.Error("dead node n2 still has an affinity")
			}
		}
	}
	if len(snap.blocks) != 1 {
		t.Errorf("n2's emptied block should be gone: %d blocks", len(snap.blocks))
	}
}

func TestGCDeletesEmptyUnownedBlocks(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26), nodeObj("n1"))
	ctx := context.Background()
	ips := mustAssign(t, a, podArgs("n1", "a", 1, 0))
	if _, err := a.ReleaseNodeBlocks(ctx, "n1"); err != nil { // block keeps the live address, loses its owner
		t.Fatal(err)
	}
	if b := checkStore(t, s).blocks; len(b) != 1 {
		t.Fatalf("%d blocks", len(b))
	}
	a.ReleaseIPs(ctx, ips...)
	rep, err := a.CheckLeaks(ctx, 0)
	if err != nil || len(rep.EmptyUnaffineBlocks) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := a.ReleaseLeaks(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if b := checkStore(t, s).blocks; len(b) != 0 {
		t.Fatalf("%d blocks left", len(b))
	}
}

// A leak whose address was released and reassigned between check and
// release is not touched.
func TestGCSparesReassignedAddress(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/30", 30), nodeObj("n1"))
	ctx := context.Background()
	ips := mustAssign(t, a, podArgs("n1", "old", 4, 0))
	rep, err := a.CheckLeaks(ctx, 0)
	if err != nil || len(rep.Leaks) != 4 {
		t.Fatalf("%v %v", rep, err)
	}
	a.ReleaseByHandle(ctx, "k8s-pod-network.old")
	if err := a.AssignIP(ctx, AssignIPArgs{IP: ips[0], HandleID: "k8s-pod-network.new", Hostname: "n1", Attrs: map[string]string{AttrNamespace: "default", AttrPod: "new"}}); err != nil {
		t.Fatal(err)
	}
	freed, err := a.ReleaseLeaks(ctx, rep)
	if err != nil || len(freed) != 0 {
		t.Fatalf("freed %v, %v", freed, err)
	}
	if snap := checkStore(t, s); snap.byIP[ips[0]] != "k8s-pod-network.new" {
		t.Fatal("reassigned address released")
	}
}

func TestReleaseEmptyBlocksAfterGrace(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26))
	ctx := context.Background()
	now := time.Unix(1000, 0)
	a.cfg.Now = func() time.Time { return now }
	mustAssign(t, a, podArgs("n1", "a", 1, 0))
	if got, _ := a.ReleaseEmptyBlocks(ctx, "n1", time.Minute); len(got) != 0 {
		t.Fatal("released a block in use")
	}
	a.ReleaseByHandle(ctx, "k8s-pod-network.a")
	if got, _ := a.ReleaseEmptyBlocks(ctx, "n1", time.Minute); len(got) != 0 {
		t.Fatal("released before the grace period")
	}
	now = now.Add(2 * time.Minute)
	got, err := a.ReleaseEmptyBlocks(ctx, "n1", time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatalf("%v %v", got, err)
	}
	snap := checkStore(t, s)
	if len(snap.blocks) != 0 || len(snap.affinities) != 0 {
		t.Fatalf("left %d blocks %d affinities", len(snap.blocks), len(snap.affinities))
	}
	// The node claims again when it needs to.
	mustAssign(t, a, podArgs("n1", "b", 1, 0))
	checkStore(t, s)
}

func TestEmptyBlockWrittenDuringGraceIsKept(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26))
	ctx := context.Background()
	now := time.Unix(1000, 0)
	a.cfg.Now = func() time.Time { return now }
	mustAssign(t, a, podArgs("n1", "a", 1, 0))
	a.ReleaseByHandle(ctx, "k8s-pod-network.a")
	a.ReleaseEmptyBlocks(ctx, "n1", time.Minute)
	mustAssign(t, a, podArgs("n1", "b", 1, 0))
	a.ReleaseByHandle(ctx, "k8s-pod-network.b")
	now = now.Add(2 * time.Minute)
	if got, _ := a.ReleaseEmptyBlocks(ctx, "n1", time.Minute); len(got) != 0 {
		t.Fatal("block used during the grace period was released")
	}
	checkStore(t, s)
}

func TestGCDeletesOrphanHandles(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26), nodeObj("n1"))
	ctx := context.Background()
	mustAssign(t, a, podArgs("n1", "a", 1, 0))
	mustCreate(t, s, wep("default", "a", "n1"))
	mustAssign(t, a, podArgs("n1", "b", 1, 0))
	mustCreate(t, s, wep("default", "b", "n1"))
	// A release that freed the block but failed to delete the handle.
	s.Fail = func(op string, k datastore.Key) error {
		if op == "delete" && k.Kind == v3.KindIPAMHandle {
			return &datastore.UnavailableError{Err: errBoom}
		}
		return nil
	}
	if _, err := a.ReleaseByHandle(ctx, "k8s-pod-network.a"); err == nil {
		t.Fatal("expected the injected failure")
	}
	s.Fail = nil
	rep, err := a.CheckLeaks(ctx, 0)
	if err != nil || !slices.Equal(rep.OrphanHandles, []string{"k8s-pod-network.a"}) || len(rep.Leaks) != 0 {
		t.Fatalf("report %+v, %v", rep, err)
	}
	if _, err := a.ReleaseLeaks(ctx, rep); err != nil {
		t.Fatal(err)
	}
	snap := checkStore(t, s)
	if len(snap.handles) != 1 {
		t.Fatalf("handles %v", snap.handles)
	}
}

func TestGCDeletesStaleAffinities(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26), nodeObj("n1"))
	ctx := context.Background()
	mustCreate(t, s, wep("default", "a", "n1", mustAssign(t, a, podArgs("n1", "a", 1, 0))...))
	// A claim that died after its pending affinity, and a confirmed
	// affinity whose block vanished.
	mustCreate(t, s, &v3.BlockAffinity{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindBlockAffinity, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: AffinityName("n1", netip.MustParsePrefix("10.0.0.128/26"))},
		Spec:       v3.BlockAffinitySpec{State: v3.BlockAffinityStatePending, Node: "n1", CIDR: "10.0.0.128/26"},
	}, &v3.BlockAffinity{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindBlockAffinity, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: AffinityName("n1", netip.MustParsePrefix("10.0.0.192/26"))},
		Spec:       v3.BlockAffinitySpec{State: v3.BlockAffinityStateConfirmed, Node: "n1", CIDR: "10.0.0.192/26"},
	})
	rep, err := a.CheckLeaks(ctx, 0)
	if err != nil || len(rep.StaleAffinities) != 2 {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := a.ReleaseLeaks(ctx, rep); err != nil {
		t.Fatal(err)
	}
	snap := checkStore(t, s)
	if len(snap.affinities) != 1 || len(snap.byIP) != 1 {
		t.Fatalf("affinities %v ips %v", snap.affinities, snap.byIP)
	}
	mustAssign(t, a, podArgs("n1", "b", 1, 0))
	checkStore(t, s)
}
