package ipam

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// TestHandleAheadWrongGuess: the cache says the node's block has room, so
// the handle is created for it alongside the block write; another process
// took the last address meanwhile, the allocation lands in a new block, and
// the handle is corrected to record exactly that.
func TestHandleAheadWrongGuess(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/24", 29))
	cnt := &ipamtest.Counter{Client: s}
	a := New(cnt, Config{CacheTTL: 1e12})
	for i := range 7 {
		mustAssign(t, a, podArgs("n1", fmt.Sprint("a", i), 1, 0))
	}
	mustAssign(t, New(s, Config{}), podArgs("n1", "other", 1, 0)) // fills the block behind a's back
	cnt.Reset()
	ips := mustAssign(t, a, podArgs("n1", "x", 1, 0))
	snap := checkStore(t, s) // handles must match the blocks exactly
	if h := snap.byIP[ips[0]]; h != "k8s-pod-network.x" {
		t.Fatalf("%s held by %q", ips[0], h)
	}
	if got := fmt.Sprint(snap.handles["k8s-pod-network.x"]); got != fmt.Sprintf("map[%s:1]", BlockFor(ips[0], 29)) {
		t.Errorf("handle records %s for %s", got, ips[0])
	}
	t.Logf("wrong guess: %d round trips", cnt.Total())
}

// TestHandleAheadTakenBack: the handle created alongside a block write is
// removed again when the allocation fails.
func TestHandleAheadTakenBack(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/29", 29), ipamConfig(true))
	a := New(s, Config{CacheTTL: 1e12})
	for i := range 7 {
		mustAssign(t, a, podArgs("n1", fmt.Sprint("a", i), 1, 0))
	}
	mustAssign(t, New(s, Config{}), podArgs("n1", "other", 1, 0))
	_, err := a.AutoAssign(context.Background(), podArgs("n1", "x", 1, 0))
	if !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("got %v, want ErrPoolExhausted", err)
	}
	snap := checkStore(t, s)
	if h, ok := snap.handles["k8s-pod-network.x"]; ok {
		t.Errorf("handle left after a failed allocation: %v", h)
	}
	if len(snap.byIP) != 8 {
		t.Errorf("%d addresses allocated, want 8", len(snap.byIP))
	}
}

// TestHandleAlongsideClaimedBlockWrite: an allocation that must first
// claim a block (the cache cannot guess where its address comes from)
// still creates its handle alongside the block write that takes the
// address, not after it: one round trip of latency fewer for every pod
// that claims, and for those waiting on its claim.
func TestHandleAlongsideClaimedBlockWrite(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/24", 29))
	g := &handleGate{Client: s, created: make(chan struct{})}
	ips := mustAssign(t, New(g, Config{}), podArgs("n1", "x", 1, 0))
	if !g.overlapped.Load() {
		t.Fatal("the handle was created after the block write, not alongside it")
	}
	snap := checkStore(t, s) // the handle records exactly the address
	if got := fmt.Sprint(snap.handles["k8s-pod-network.x"]); got != fmt.Sprintf("map[%s:1]", BlockFor(ips[0], 29)) {
		t.Errorf("handle records %s for %s", got, ips[0])
	}
}

// handleGate holds each IPAMBlock update until an IPAMHandle create has
// started (at most 10 s), and says whether one had.
type handleGate struct {
	datastore.Client
	created    chan struct{}
	once       sync.Once
	overlapped atomic.Bool
}

func (g *handleGate) Create(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	if _, ok := r.(*v3.IPAMHandle); ok {
		g.once.Do(func() { close(g.created) })
	}
	return g.Client.Create(ctx, r)
}

func (g *handleGate) Update(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	if _, ok := r.(*v3.IPAMBlock); ok {
		select {
		case <-g.created:
			g.overlapped.Store(true)
		case <-time.After(10 * time.Second):
		}
	}
	return g.Client.Update(ctx, r)
}
