package routes

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/infra"
)

// fakeApplier records what it is asked to apply and fails on demand.
type fakeApplier struct {
	mu      sync.Mutex
	applied []Desired
	fail    int
	calls   chan struct{}
}

func (f *fakeApplier) Apply(d Desired) (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.calls <- struct{}{} }()
	if f.fail > 0 {
		f.fail--
		return Stats{}, errors.New("injected failure")
	}
	f.applied = append(f.applied, d)
	return Stats{}, nil
}

func update(r v3.Resource) datastore.Update {
	return datastore.Update{Type: datastore.EventAdded, Key: datastore.Key{Kind: kindOf(r), Name: r.GetName()}, Object: r}
}

func kindOf(r v3.Resource) string {
	switch r.(type) {
	case *v3.WorkloadEndpoint:
		return v3.KindWorkloadEndpoint
	case *v3.IPAMBlock:
		return v3.KindIPAMBlock
	}
	return v3.KindProfile
}

// TestManagerWaitsForSnapshotAndRetries: nothing is applied before the
// syncer is in sync and the cluster is known; a failed apply is retried (with backoff) until it
// succeeds; other kinds are ignored.
func TestManagerWaitsForSnapshotAndRetries(t *testing.T) {
	f := &fakeApplier{fail: 2, calls: make(chan struct{}, 100)}
	m := NewManager(ManagerConfig{NodeName: "n0", Driver: f, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	var ups []datastore.Update
	for _, b := range threeBlocks() {
		ups = append(ups, update(b))
	}
	ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.Key{Kind: v3.KindProfile, Name: "x"}, Object: &v3.Profile{}})
	m.OnUpdates(ups)
	if ok, err := m.Sync(); ok || err != nil {
		t.Fatalf("Sync before the snapshot = %v, %v; want nothing done", ok, err)
	}
	m.OnStatusUpdated(datastore.StatusInSync)
	if ok, err := m.Sync(); ok || err != nil {
		t.Fatalf("Sync before the cluster = %v, %v; want nothing done", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	m.SetCluster(infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}, threeNodes()))
	for range 3 { // two failures, then success
		select {
		case <-f.calls:
		case <-time.After(10 * time.Second):
			t.Fatal("the manager did not retry")
		}
	}
	cancel()
	<-done
	if !m.InSync() || len(f.applied) != 1 || len(f.applied[0].Routes) != 2 {
		t.Fatalf("InSync %v, applied %+v; want one successful apply of 2 routes", m.InSync(), f.applied)
	}
}

// TestManagerCountsUnusableInput: a Node whose address cannot be read
// leaves its blocks without routes, counted in felix_route_bad_input
// (and logged once), not dropped unseen; fixing it brings the count back
// to zero.
func TestManagerCountsUnusableInput(t *testing.T) {
	f := &fakeApplier{calls: make(chan struct{}, 100)}
	reg := prometheus.NewRegistry()
	mt := NewMetrics(reg)
	m := NewManager(ManagerConfig{NodeName: "n0", Driver: f, Metrics: mt})
	nodes := threeNodes()
	broken := nodes[1].DeepCopy()
	broken.Spec.BGP.IPv4Address = "not-an-address"
	var ups []datastore.Update
	for _, b := range threeBlocks() {
		ups = append(ups, update(b))
	}
	m.OnUpdates(ups)
	pools := []*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}
	m.SetCluster(infra.Derive(pools, []*v3.Node{nodes[0], broken, nodes[2]}))
	m.OnStatusUpdated(datastore.StatusInSync)
	if _, err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(mt.BadInput); got < 1 {
		t.Fatalf("felix_route_bad_input = %v with an unusable Node; want it counted", got)
	}
	m.SetCluster(infra.Derive(pools, nodes))
	if _, err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(mt.BadInput); got != 0 {
		t.Fatalf("felix_route_bad_input = %v after the Node was fixed; want 0", got)
	}
}

// TestManagerWithoutNodeAddressKeepsLocalRoutes: this node's Node has no
// address (none recorded, or no Node at all): every local workload route
// is still desired, felix_route_node_address_missing is 1 and the log says
// so once; when the address comes the cross-node routes follow and the
// gauge drops to 0.
func TestManagerWithoutNodeAddressKeepsLocalRoutes(t *testing.T) {
	var logs strings.Builder
	reg := prometheus.NewRegistry()
	mt := NewMetrics(reg)
	m := NewManager(ManagerConfig{NodeName: "n0", Driver: &fakeApplier{calls: make(chan struct{}, 100)}, Metrics: mt,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ups := []datastore.Update{update(wep("a", "cali12345", "10.70.0.5/32")), update(wep("b", "cali23456", "10.70.0.6"))}
	for _, b := range threeBlocks() {
		ups = append(ups, update(b))
	}
	m.OnUpdates(ups)
	m.OnStatusUpdated(datastore.StatusInSync)
	pools := []*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}
	local := []Route{
		{Dst: pfx("10.70.0.5/32"), Dev: "cali12345", Workload: true, Node: "n0"},
		{Dst: pfx("10.70.0.6/32"), Dev: "cali23456", Workload: true, Node: "n0"},
	}
	noAddr := threeNodes()
	noAddr[0].Spec.BGP = nil
	for name, nodes := range map[string][]*v3.Node{"no address": noAddr, "no Node": threeNodes()[1:]} {
		t.Run(name, func(t *testing.T) {
			logs.Reset()
			m.SetCluster(infra.Derive(pools, nodes))
			for range 2 {
				if _, err := m.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			d := m.Desired()
			if diff := cmp.Diff(local, d.Routes, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" || d.VXLAN != nil {
				t.Errorf("routes without this node's address (-want +got):\n%s\nVXLAN %v", diff, d.VXLAN)
			}
			if got := testutil.ToFloat64(mt.NodeAddressMissing); got != 1 {
				t.Errorf("felix_route_node_address_missing = %v, want 1", got)
			}
			if n := strings.Count(logs.String(), "has no address"); n > 1 {
				t.Errorf("missing address logged %d times, want at most once per change:\n%s", n, logs.String())
			}
			m.SetCluster(infra.Derive(pools, threeNodes()))
			if _, err := m.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := len(m.Desired().Routes); got != 4 {
				t.Errorf("%d routes once the address is known, want 2 local + 2 remote", got)
			}
			if got := testutil.ToFloat64(mt.NodeAddressMissing); got != 0 {
				t.Errorf("felix_route_node_address_missing = %v with the address, want 0", got)
			}
		})
	}
	if !strings.Contains(logs.String(), "this node's address is known") {
		t.Errorf("the address's arrival not logged:\n%s", logs.String())
	}
}

// TestReadyAfterGrace: readiness fails before the first successful sync
// and once syncs have kept failing for the grace period, naming the error;
// a success clears it.
func TestReadyAfterGrace(t *testing.T) {
	m := NewManager(ManagerConfig{NodeName: "n"})
	now := time.Now()
	if ok, why := m.Ready(now, time.Second); ok || why != "routes not programmed yet" {
		t.Fatalf("before any sync: %v %q", ok, why)
	}
	m.noteFailure(errors.New("creating tunl0 (does the kernel have ipip?): operation not supported"))
	if ok, why := m.Ready(now, time.Minute); ok || !strings.Contains(why, "last attempt: creating tunl0") {
		t.Fatalf("failing within grace, never synced: %v %q", ok, why)
	}
	if ok, why := m.Ready(now.Add(2*time.Minute), time.Minute); ok || !strings.HasPrefix(why, "route sync failing for 2m0s: creating tunl0") {
		t.Fatalf("failing past grace: %v %q", ok, why)
	}
	m.noteFailure(nil)
	if ok, why := m.Ready(now, time.Minute); !ok {
		t.Fatalf("after a success: %q", why)
	}
	m.noteFailure(errors.New("boom"))
	if ok, _ := m.Ready(time.Now(), time.Minute); !ok {
		t.Fatal("one failure after a success, within grace: not ready")
	}
}
