package dstest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// NewSyncer builds the backend's syncer for kinds; the suite's syncer tests
// use it. Backends set it in their test before calling Run (the generic
// WatchSyncer by default).
var NewSyncer = func(c datastore.Client, kinds []string, cb datastore.SyncerCallbacks) datastore.Syncer {
	return datastore.NewWatchSyncer(c, kinds, cb, datastore.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond})
}

// recorder collects what a syncer delivers and keeps the resulting view.
type recorder struct {
	mu       sync.Mutex
	statuses []datastore.SyncStatus
	log      []string // "Added IPPool(a)" etc., in delivery order
	view     map[datastore.Key]v3.Resource
	changed  chan struct{}
}

func newRecorder() *recorder {
	return &recorder{view: map[datastore.Key]v3.Resource{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) OnStatusUpdated(s datastore.SyncStatus) {
	r.mu.Lock()
	r.statuses = append(r.statuses, s)
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) OnUpdates(ups []datastore.Update) {
	r.mu.Lock()
	for _, u := range ups {
		r.log = append(r.log, fmt.Sprintf("%s %s", u.Type, u.Key))
		if u.Type == datastore.EventDeleted {
			delete(r.view, u.Key)
		} else {
			r.view[u.Key] = u.Object
		}
	}
	r.mu.Unlock()
	r.poke()
}

func (r *recorder) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// waitFor polls cond (under the lock) until it holds or 60s pass.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			r.mu.Lock()
			defer r.mu.Unlock()
			t.Fatalf("timed out waiting for %s; statuses %v; log:\n%s", what, r.statuses, strings.Join(r.log, "\n"))
		}
	}
}

func (r *recorder) inSync() bool {
	return len(r.statuses) > 0 && r.statuses[len(r.statuses)-1] == datastore.StatusInSync
}

// viewNames lists the names in the view for a kind, sorted.
func (r *recorder) viewNames(kind string) string {
	var out []string
	for k := range r.view {
		if k.Kind == kind {
			out = append(out, k.Name)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func startSyncer(t *testing.T, c datastore.Client, kinds ...string) *recorder {
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		NewSyncer(c, kinds, rec).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("syncer did not stop within 30s of its context ending")
		}
	})
	return rec
}

func testSyncer(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	mustR(t)(c.Create(ctx, pool("s1", "10.30.0.0/16")))
	mustR(t)(c.Create(ctx, pool("s2", "10.31.0.0/16")))
	mustR(t)(c.Create(ctx, netset("ns", "set1", nil, "10.0.0.0/24")))

	rec := startSyncer(t, c, v3.KindIPPool, v3.KindNetworkSet)
	rec.waitFor(t, "in sync", rec.inSync)
	rec.mu.Lock()
	if got := rec.viewNames(v3.KindIPPool); got != "s1,s2" {
		t.Errorf("snapshot pools %q, want s1,s2", got)
	}
	if got := rec.viewNames(v3.KindNetworkSet); got != "set1" {
		t.Errorf("snapshot network sets %q, want set1", got)
	}
	if rec.statuses[0] != datastore.StatusWaitForDatastore {
		t.Errorf("first status %v, want %v", rec.statuses[0], datastore.StatusWaitForDatastore)
	}
	snapshotLen := len(rec.log)
	rec.mu.Unlock()

	p := mustR(t)(c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "s1"})).(*v3.IPPool)
	p.Spec.Disabled = true
	mustR(t)(c.Update(ctx, p))
	mustR(t)(c.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "s2"}, datastore.DeleteOptions{}))
	mustR(t)(c.Create(ctx, pool("s3", "10.32.0.0/16")))

	rec.waitFor(t, "updates", func() bool { return len(rec.log) >= snapshotLen+3 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	got := strings.Join(rec.log[snapshotLen:], "; ")
	want := "Modified IPPool(s1); Deleted IPPool(s2); Added IPPool(s3)"
	if got != want {
		t.Errorf("updates after sync:\n got %s\nwant %s", got, want)
	}
	if !rec.view[datastore.Key{Kind: v3.KindIPPool, Name: "s1"}].(*v3.IPPool).Spec.Disabled {
		t.Error("view does not hold the updated s1")
	}
}

// testSyncerRelist: the syncer keeps delivering, exactly once per change,
// when the store compacts its history under a running sync. (The relist
// path itself, a watch that fails with ErrRevisionGone, is driven
// deterministically in datastore's unit tests; informer-based syncers
// relist inside client-go.)
func testSyncerRelist(t *testing.T, h Harness) {
	c := h.New(t)
	ctx := ctxT(t)
	mustR(t)(c.Create(ctx, pool("r1", "10.40.0.0/16")))
	rec := startSyncer(t, c, v3.KindIPPool)
	rec.waitFor(t, "in sync", rec.inSync)
	rec.waitFor(t, "r1", func() bool { return rec.viewNames(v3.KindIPPool) == "r1" })

	mustR(t)(c.Create(ctx, pool("r2", "10.41.0.0/16")))
	rec.waitFor(t, "r2", func() bool { return rec.viewNames(v3.KindIPPool) == "r1,r2" })
	l := mustL(t)(c.List(ctx, v3.KindIPPool, datastore.ListOptions{}))
	h.ForceRevisionGone(t, c, l.Revision)
	mustR(t)(c.Create(ctx, pool("r3", "10.42.0.0/16")))
	rec.waitFor(t, "r3 after compaction", func() bool { return rec.viewNames(v3.KindIPPool) == "r1,r2,r3" })

	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, line := range rec.log {
		if strings.HasPrefix(line, "Deleted") {
			t.Errorf("relist delivered a spurious %q; log: %v", line, rec.log)
		}
	}
	adds := 0
	for _, line := range rec.log {
		if line == "Added IPPool(r1)" {
			adds++
		}
	}
	if adds != 1 {
		t.Errorf("r1 added %d times, want once (relist must deliver only differences); log: %v", adds, rec.log)
	}
}

// testServerDown: with the server down, writes fail with ErrUnavailable
// naming the endpoint and nothing is half-written; the syncer carries on
// by itself when the server returns.
func testServerDown(t *testing.T, h Harness) {
	c := h.New(t)
	ctx := ctxT(t)
	mustR(t)(c.Create(ctx, pool("d1", "10.50.0.0/16")))
	rec := startSyncer(t, c, v3.KindIPPool)
	rec.waitFor(t, "in sync", rec.inSync)

	h.StopServer(t)
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := c.Create(short, pool("d2", "10.51.0.0/16"))
	cancel()
	wantErr(t, err, datastore.ErrUnavailable)
	if !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("unavailable error does not say which endpoint: %v", err)
	}

	h.StartServer(t)
	// The store is back: the client and syncer recover without restarts.
	var created v3.Resource
	deadline := time.Now().Add(60 * time.Second)
	for {
		created, err = c.Create(ctx, pool("d3", "10.52.0.0/16"))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("client did not recover after the server returned: %v", err)
	}
	_ = created
	rec.waitFor(t, "d3 after restart", func() bool { return rec.viewNames(v3.KindIPPool) == "d1,d3" })
	if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "d2"}); !errorsIsNotFound(err) {
		t.Errorf("the create that failed while down left something behind: %v", err)
	}
}

func errorsIsNotFound(err error) bool { return err != nil && isNotFound(err) }
