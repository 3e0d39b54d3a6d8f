package ipam

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// TestClaimConfirmsWithoutReading: a claim confirms the pending affinity
// it created from the version its create returned: no read of it (on the
// Kubernetes datastore each read is an API request).
func TestClaimConfirmsWithoutReading(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/16", 26))
	cnt := &ipamtest.Counter{Client: s}
	a := New(cnt, Config{CacheTTL: 5 * time.Second})
	if err := a.Warm(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	cnt.Reset()
	mustAssign(t, a, podArgs("n1", "first", 1, 0))
	if g := cnt.Gets.Load(); g != 0 {
		t.Errorf("claim and first allocation: %d single reads, want 0", g)
	}
	// affinity + block, then the handle; the block CAS and the confirm
	// are the updates.
	if c, u := cnt.Creates.Load(), cnt.Updates.Load(); c != 3 || u != 2 {
		t.Errorf("creates %d updates %d, want 3 and 2", c, u)
	}
	affs, err := s.List(context.Background(), v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil || len(affs.Items) != 1 {
		t.Fatalf("affinities %v %v, want 1", affs, err)
	}
	if st := affs.Items[0].(*v3.BlockAffinity).Spec.State; st != v3.BlockAffinityStateConfirmed {
		t.Errorf("affinity state %q, want confirmed", st)
	}
	checkStore(t, s)
}

// turnLock is a ClaimLock: the first caller takes it at once, every later
// one waits until it is given back and is told it waited.
type turnLock struct {
	mu    sync.Mutex
	first bool
	freed chan struct{}
}

func (l *turnLock) lock(ctx context.Context, node string) (func(), bool) {
	l.mu.Lock()
	if !l.first {
		l.first = true
		l.mu.Unlock()
		return func() { close(l.freed) }, false
	}
	l.mu.Unlock()
	<-l.freed
	return func() {}, true
}

// TestClaimLockOneClaimPerNode: allocations of one node started together
// in separate processes (Allocators), taking turns through ClaimLock: one
// claims the block, the others find it when they look again and claim
// nothing (one affinity and one block created in all). All addresses are
// distinct and the store is consistent.
func TestClaimLockOneClaimPerNode(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/16", 26))
	cnt := &ipamtest.Counter{Client: s}
	l := &turnLock{freed: make(chan struct{})}
	const procs = 4
	var wg sync.WaitGroup
	got := make([]string, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := New(cnt, Config{CacheTTL: 5 * time.Second, ClaimLock: l.lock})
			if err := a.Warm(context.Background(), "n1"); err != nil {
				t.Error(err)
				return
			}
			ips, err := a.AutoAssign(context.Background(), podArgs("n1", fmt.Sprint("pod", i), 1, 0))
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = ips[0].String()
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ip := range got {
		if ip == "" || seen[ip] {
			t.Fatalf("addresses %v: want %d distinct", got, procs)
		}
		seen[ip] = true
	}
	if c := cnt.Creates.Load(); c != 2+procs {
		t.Errorf("%d creates, want %d (one affinity, one block, a handle each)", c, 2+procs)
	}
	affs, err := s.List(context.Background(), v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(affs.Items) != 1 {
		t.Errorf("%d affinities, want 1", len(affs.Items))
	}
	checkStore(t, s)
}
