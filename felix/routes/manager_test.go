package routes

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
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
	case *v3.Node:
		return v3.KindNode
	case *v3.IPAMBlock:
		return v3.KindIPAMBlock
	}
	return v3.KindIPPool
}

// TestManagerWaitsForSnapshotAndRetries: nothing is applied before the
// syncer is in sync; a failed apply is retried (with backoff) until it
// succeeds; other kinds are ignored.
func TestManagerWaitsForSnapshotAndRetries(t *testing.T) {
	f := &fakeApplier{fail: 2, calls: make(chan struct{}, 100)}
	m := NewManager(ManagerConfig{NodeName: "n0", Driver: f, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond})
	var ups []datastore.Update
	for _, n := range threeNodes() {
		ups = append(ups, update(n))
	}
	for _, b := range threeBlocks() {
		ups = append(ups, update(b))
	}
	ups = append(ups, update(ippool("10.70.0.0/16", "Never", "Always")),
		datastore.Update{Type: datastore.EventAdded, Key: datastore.Key{Kind: v3.KindProfile, Name: "x"}, Object: &v3.Profile{}})
	m.OnUpdates(ups)
	if ok, err := m.Sync(); ok || err != nil {
		t.Fatalf("Sync before the snapshot = %v, %v; want nothing done", ok, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	m.OnStatusUpdated(datastore.StatusInSync)
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

// TestManagerCountsUnusableInput: a Node the calculation cannot use is
// counted in felix_route_bad_input (and logged once), not dropped unseen;
// fixing it brings the count back to zero.
func TestManagerCountsUnusableInput(t *testing.T) {
	f := &fakeApplier{calls: make(chan struct{}, 100)}
	reg := prometheus.NewRegistry()
	mt := NewMetrics(reg)
	m := NewManager(ManagerConfig{NodeName: "n0", Driver: f, Metrics: mt})
	nodes := threeNodes()
	broken := nodes[1].DeepCopy()
	broken.Spec.BGP.IPv4Address = "not-an-address"
	var ups []datastore.Update
	for _, n := range []*v3.Node{nodes[0], broken, nodes[2]} {
		ups = append(ups, update(n))
	}
	for _, b := range threeBlocks() {
		ups = append(ups, update(b))
	}
	m.OnUpdates(append(ups, update(ippool("10.70.0.0/16", "Never", "Always"))))
	m.OnStatusUpdated(datastore.StatusInSync)
	if _, err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(mt.BadInput); got < 1 {
		t.Fatalf("felix_route_bad_input = %v with an unusable Node; want it counted", got)
	}
	m.OnUpdates([]datastore.Update{{Type: datastore.EventModified, Key: datastore.Key{Kind: v3.KindNode, Name: nodes[1].Name}, Object: nodes[1]}})
	if _, err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(mt.BadInput); got != 0 {
		t.Fatalf("felix_route_bad_input = %v after the Node was fixed; want 0", got)
	}
}
