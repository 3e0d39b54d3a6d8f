package syncclient_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncclient"
	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/syncserver"
)

// recorder keeps what a client delivered.
type recorder struct {
	mu      sync.Mutex
	ups     []datastore.Update
	calls   int
	inSync  bool
	changed chan struct{}
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{}, 100)} }

func (r *recorder) OnStatusUpdated(s datastore.SyncStatus) {
	r.mu.Lock()
	r.inSync = s == datastore.StatusInSync
	r.mu.Unlock()
	r.changed <- struct{}{}
}

func (r *recorder) OnUpdates(ups []datastore.Update) {
	r.mu.Lock()
	r.ups = append(r.ups, ups...)
	r.calls++
	r.mu.Unlock()
	r.changed <- struct{}{}
}

func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func policy(name, rv string, order float64) *v3.GlobalNetworkPolicy {
	p := &v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	p.Spec.Order = &order
	return p
}

func add(c *snapcache.Cache, objs ...v3.Resource) {
	var ups []datastore.Update
	for _, o := range objs {
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(o), Object: o})
	}
	c.OnUpdates(ups)
}

// typha is one server over a cache, stoppable.
type typha struct {
	addr string
	stop context.CancelFunc
	done chan struct{}
}

func startTypha(t *testing.T, c *snapcache.Cache) *typha {
	t.Helper()
	return startTyphaWith(t, c, syncserver.Config{})
}

// startTyphaWith is startTypha with the server configured by cfg.
func startTyphaWith(t *testing.T, c *snapcache.Cache, cfg syncserver.Config) *typha {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ty := &typha{addr: l.Addr().String(), stop: cancel, done: make(chan struct{})}
	srv := syncserver.New(map[syncproto.SyncerType]*snapcache.Cache{syncproto.SyncerTypeFelix: c}, cfg)
	go func() { defer close(ty.done); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-ty.done })
	return ty
}

// TestResyncDeliversOnlyChanges: a client follows one Typha, loses it, and
// resyncs through another: only what changed while it was away is
// delivered (no delete/re-add of the rest), and its status stays InSync.
func TestResyncDeliversOnlyChanges(t *testing.T) {
	cache := snapcache.New("felix", time.Now, nil, nil)
	add(cache, policy("a", "1", 1), policy("b", "2", 2), policy("c", "3", 3))
	cache.OnStatusUpdated(datastore.StatusInSync)
	a, b := startTypha(t, cache), startTypha(t, cache)

	var mu sync.Mutex
	addrs := []string{a.addr}
	rec := newRecorder()
	cl := syncclient.New(syncclient.Config{SyncerType: syncproto.SyncerTypeFelix, Hostname: "n1",
		Addrs: func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), addrs...), nil
		}}, rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	rec.waitFor(t, "in sync with 3 policies", func() bool { return rec.inSync && len(rec.ups) == 3 })
	add(cache, policy("d", "4", 4))
	rec.waitFor(t, "the 4th policy", func() bool { return len(rec.ups) == 4 })

	// Typha a dies; while the client is away, b changes and d goes.
	mu.Lock()
	addrs = []string{a.addr, b.addr}
	mu.Unlock()
	calls := rec.calls
	a.stop()
	<-a.done
	cache.OnUpdates([]datastore.Update{{Type: datastore.EventModified, Key: datastore.KeyOf(policy("b", "", 0)), Object: policy("b", "5", 20)},
		{Type: datastore.EventDeleted, Key: datastore.KeyOf(policy("d", "", 0))}})
	rec.waitFor(t, "the resync's changes", func() bool { return len(rec.ups) >= 6 })
	time.Sleep(200 * time.Millisecond)
	rec.mu.Lock()
	got := rec.ups[4:]
	if len(got) != 2 || rec.calls-calls > 2 || !rec.inSync {
		t.Fatalf("resync delivered %d updates in %d calls (want 2), inSync %v: %+v", len(got), rec.calls-calls, rec.inSync, got)
	}
	rec.mu.Unlock()
	want := map[string]datastore.EventType{"b": datastore.EventModified, "d": datastore.EventDeleted}
	for _, u := range got {
		if want[u.Key.Name] != u.Type {
			t.Errorf("unexpected %s %s", u.Type, u.Key)
		}
	}

	// Nothing changes across another reconnection: nothing is delivered.
	calls = rec.calls
	b.stop()
	<-b.done
	c2 := startTypha(t, cache)
	mu.Lock()
	addrs = []string{c2.addr}
	mu.Unlock()
	add(cache, policy("e", "6", 6)) // proves the client is live on c2
	rec.waitFor(t, "policy e through the third Typha", func() bool { return len(rec.ups) == 7 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.calls-calls != 1 || rec.ups[6].Key.Name != "e" {
		t.Errorf("an unchanged resync delivered: %d calls, last %v", rec.calls-calls, rec.ups[6].Key)
	}
}

// TestKindsFilteredAndDecoded: a client gets only its kinds, as the
// objects Typha was given.
func TestKindsFilteredAndDecoded(t *testing.T) {
	cache := snapcache.New("felix", time.Now, nil, nil)
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "9"}, Spec: v3.IPPoolSpec{CIDR: "10.0.0.0/16"}}
	add(cache, policy("a", "1", 1), pool)
	cache.OnStatusUpdated(datastore.StatusInSync)
	a := startTypha(t, cache)
	rec := newRecorder()
	cl := syncclient.New(syncclient.Config{SyncerType: syncproto.SyncerTypeFelix, Kinds: []string{v3.KindIPPool},
		Addrs: func(context.Context) ([]string, error) { return []string{a.addr}, nil }}, rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cl.Run(ctx) }()
	defer func() { cancel(); <-done }()
	rec.waitFor(t, "in sync", func() bool { return rec.inSync })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.ups) != 1 {
		t.Fatalf("got %d updates, want the pool only", len(rec.ups))
	}
	p, ok := rec.ups[0].Object.(*v3.IPPool)
	if !ok || p.Spec.CIDR != "10.0.0.0/16" || p.ResourceVersion != "9" {
		t.Errorf("pool decoded as %#v", rec.ups[0].Object)
	}
}
