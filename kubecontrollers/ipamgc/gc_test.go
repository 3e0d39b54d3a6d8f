package ipamgc

import (
	"context"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

type fakePods map[string]bool

func (f fakePods) Exists(_ context.Context, ns, name string) (bool, error) {
	return f[ns+"/"+name], nil
}

type world struct {
	t     *testing.T
	store *ipamtest.Store
	now   time.Time
	alloc *ipam.Allocator
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, store: ipamtest.NewStore(), now: time.Unix(1_000_000, 0)}
	w.store.Now = func() time.Time { return w.now }
	w.alloc = ipam.New(w.store, ipam.Config{Now: func() time.Time { return w.now }})
	w.create(&v3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v3.IPPoolSpec{CIDR: "10.9.0.0/16", BlockSize: 28}})
	return w
}

func (w *world) create(r v3.Resource) {
	w.t.Helper()
	if _, err := w.store.Create(context.Background(), r); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) node(name string) {
	w.create(&v3.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// pod allocates an address for ns/name on node and, with wep, records its
// endpoint.
func (w *world) pod(ns, name, node string, wep bool) netip.Addr {
	w.t.Helper()
	ips, err := w.alloc.AutoAssign(context.Background(), ipam.AutoAssignArgs{Num4: 1, HandleID: "h-" + name, Hostname: node,
		Attrs: map[string]string{ipam.AttrNamespace: ns, ipam.AttrPod: name, ipam.AttrNode: node}})
	if err != nil {
		w.t.Fatal(err)
	}
	if wep {
		w.create(&v3.WorkloadEndpoint{ObjectMeta: metav1.ObjectMeta{Name: node + "-k8s-" + name + "-eth0", Namespace: ns},
			Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: name, Endpoint: "eth0", InterfaceName: "cali" + name,
				IPNetworks: []string{ips[0].String() + "/32"}}})
	}
	return ips[0]
}

func (w *world) allocated(ip netip.Addr) bool {
	w.t.Helper()
	al, err := w.alloc.ListAllocations(context.Background(), func(a ipam.Allocated) bool { return a.IP == ip })
	if err != nil {
		w.t.Fatal(err)
	}
	return len(al) > 0
}

func (w *world) pass(g *GC) Result {
	w.t.Helper()
	r, err := g.Pass(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// TestGraceFromFirstSight: an address whose endpoint is gone is released
// only once it has looked leaked for the whole grace period, counted from
// the first pass that saw it; a live one never.
func TestGraceFromFirstSight(t *testing.T) {
	w := newWorld(t)
	w.node("n1")
	live := w.pod("default", "live", "n1", true)
	leaked := w.pod("default", "gone", "n1", false) // its endpoint never written / deleted
	g := New(Config{Client: w.store, Allocator: w.alloc, Grace: 10 * time.Minute, Now: func() time.Time { return w.now }})

	w.now = w.now.Add(time.Hour) // handle ages do not count: first sight does
	if r := w.pass(g); len(r.Released) != 0 || r.Candidates != 1 {
		t.Fatalf("first sight: %+v", r)
	}
	w.now = w.now.Add(10*time.Minute - time.Second)
	w.pass(g)
	if !w.allocated(leaked) {
		t.Fatal("released before the grace period")
	}
	w.now = w.now.Add(time.Second)
	if r := w.pass(g); len(r.Released) != 1 || r.Released[0].IP != leaked {
		t.Fatalf("after the grace period: %+v", r)
	}
	w.now = w.now.Add(1000 * time.Hour)
	w.pass(g)
	if !w.allocated(live) {
		t.Fatal("a live endpoint's address was released")
	}
}

// TestGraceZeroDisablesLeakCollection: grace 0 releases no leak of a live
// node, but still what a deleted node held.
func TestGraceZeroDisablesLeakCollection(t *testing.T) {
	w := newWorld(t)
	w.node("n1")
	leaked := w.pod("default", "gone", "n1", false)
	dead := w.pod("default", "orphan", "n2", false) // n2 has no Node
	g := New(Config{Client: w.store, Allocator: w.alloc, Now: func() time.Time { return w.now }})
	w.pass(g)
	w.now = w.now.Add(1000 * time.Hour)
	w.pass(g)
	if !w.allocated(leaked) {
		t.Fatal("grace 0 released a live node's leak")
	}
	if w.allocated(dead) {
		t.Fatal("a deleted node's address kept")
	}
	l, err := w.store.List(context.Background(), v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range l.Items {
		if r.(*v3.BlockAffinity).Spec.Node == "n2" {
			t.Fatal("the deleted node's affinity kept")
		}
	}
}

// TestStaleEndpoints (etcd mode): the endpoint of a pod gone from
// Kubernetes is deleted after the grace period, and its address released
// in the same pass; an endpoint whose pod exists is kept.
func TestStaleEndpoints(t *testing.T) {
	w := newWorld(t)
	w.node("n1")
	gone := w.pod("default", "gone", "n1", true)
	live := w.pod("default", "live", "n1", true)
	g := New(Config{Client: w.store, Allocator: w.alloc, Grace: time.Minute, Now: func() time.Time { return w.now },
		Pods: fakePods{"default/live": true}})
	if r := w.pass(g); len(r.DeletedEndpoints) != 0 {
		t.Fatalf("deleted at first sight: %+v", r)
	}
	w.now = w.now.Add(time.Minute)
	r := w.pass(g)
	if len(r.DeletedEndpoints) != 1 || r.DeletedEndpoints[0] != "default/n1-k8s-gone-eth0" {
		t.Fatalf("stale endpoint not deleted: %+v", r)
	}
	if w.allocated(gone) || !w.allocated(live) {
		t.Fatalf("after the pass: gone allocated %v, live allocated %v", w.allocated(gone), w.allocated(live))
	}
}
