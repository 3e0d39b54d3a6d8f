package routes

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
