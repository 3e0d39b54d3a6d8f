package datastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// fakeStore is a minimal Client for the syncer's pure logic: List returns
// its items; each Watch hands the test a channel to drive.
type fakeStore struct {
	mu       sync.Mutex
	items    map[string]v3.Resource
	listErr  error
	lists    int
	watches  chan chan Event
	revision int
	bad      map[string]BadRecord
}

func newFakeStore() *fakeStore {
	return &fakeStore{items: map[string]v3.Resource{}, watches: make(chan chan Event, 10), bad: map[string]BadRecord{}}
}

func (f *fakeStore) put(name string) v3.Resource {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision++
	p := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: fmt.Sprint(f.revision),
		Annotations: map[string]string{"put-at": fmt.Sprint(f.revision)}}}
	f.items[name] = p
	delete(f.bad, name)
	return p
}

// touch stores name again as it is, at a new revision (as a write the
// converted resource does not show).
func (f *fakeStore) touch(name string) v3.Resource {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision++
	p := f.items[name].DeepCopyObject().(*v3.IPPool)
	p.ResourceVersion = fmt.Sprint(f.revision)
	f.items[name] = p
	return p
}

func (f *fakeStore) remove(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.items, name)
	delete(f.bad, name)
}

// putBad stores an undecodable record under name.
func (f *fakeStore) putBad(name string) BadRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revision++
	delete(f.items, name)
	b := BadRecord{Key: Key{Kind: v3.KindIPPool, Name: name}, StorageKey: "/pools/" + name, Revision: fmt.Sprint(f.revision), Err: errors.New("unexpected end of JSON input")}
	f.bad[name] = b
	return b
}

func (f *fakeStore) List(ctx context.Context, kind string, _ ListOptions) (*List, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	l := &List{Revision: fmt.Sprint(f.revision)}
	for _, it := range f.items {
		l.Items = append(l.Items, it)
	}
	Sort(l.Items)
	for _, b := range f.bad {
		l.Bad = append(l.Bad, b)
	}
	return l, nil
}

type fakeWatcher struct{ ch chan Event }

func (w fakeWatcher) ResultChan() <-chan Event { return w.ch }
func (w fakeWatcher) Stop()                    {}

func (f *fakeStore) Watch(ctx context.Context, kind string, _ WatchOptions) (Watcher, error) {
	ch := make(chan Event, 10)
	f.watches <- ch
	return fakeWatcher{ch}, nil
}

func (f *fakeStore) Create(context.Context, v3.Resource) (v3.Resource, error) { panic("unused") }
func (f *fakeStore) Update(context.Context, v3.Resource) (v3.Resource, error) { panic("unused") }
func (f *fakeStore) Delete(context.Context, Key, DeleteOptions) (v3.Resource, error) {
	panic("unused")
}
func (f *fakeStore) Get(context.Context, Key) (v3.Resource, error) { panic("unused") }
func (f *fakeStore) Close() error                                  { return nil }

type logCallbacks struct {
	mu  sync.Mutex
	log []string
}

func (c *logCallbacks) OnStatusUpdated(s SyncStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, string(s))
}

func (c *logCallbacks) OnUpdates(ups []Update) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range ups {
		e := string(u.Type) + " " + u.Key.Name
		if u.Type == EventDeleted && u.Object != nil {
			e += " (last state " + u.Object.GetResourceVersion() + ")"
		}
		c.log = append(c.log, e)
	}
}

func (c *logCallbacks) waitLen(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		if len(c.log) >= n {
			s := strings.Join(c.log, "; ")
			c.mu.Unlock()
			return s
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Fatalf("log has %d entries, want %d: %v", len(c.log), n, c.log)
	return ""
}

func nextWatch(t *testing.T, f *fakeStore) chan Event {
	t.Helper()
	select {
	case ch := <-f.watches:
		return ch
	case <-time.After(10 * time.Second):
		t.Fatal("syncer did not watch")
	}
	return nil
}

// TestWatchSyncerVersionOnlyChanges: a pool stored again as it was, at a
// new version, is delivered, live and when a relist finds it (felix's
// endpoint report names the versions it read: see VersionOnlyChange).
func TestWatchSyncerVersionOnlyChanges(t *testing.T) {
	f := newFakeStore()
	f.put("a")
	f.put("b")
	cb := &logCallbacks{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewWatchSyncer(f, []string{v3.KindIPPool}, cb, Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond})
	go s.Run(ctx)
	w1 := nextWatch(t, f)
	cb.waitLen(t, 4)
	w1 <- Event{Type: EventModified, Object: f.touch("a")}
	f.touch("b")
	w1 <- Event{Type: EventError, Err: ErrRevisionGone}
	nextWatch(t, f) <- Event{Type: EventAdded, Object: f.put("c")}
	want := "WaitForDatastore; Added a; Added b; InSync; Modified a; Modified b; Added c"
	if got := cb.waitLen(t, strings.Count(want, ";")+1); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// TestVersionOnlyChange: only a Node's or WorkloadEndpoint's change of
// version alone is one the syncers skip.
func TestVersionOnlyChange(t *testing.T) {
	node := &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode}, ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Labels: map[string]string{"a": "b"}}}
	wep := &v3.WorkloadEndpoint{TypeMeta: metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint}, ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: "1"}}
	pol := &v3.NetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy}, ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "1"}}
	at := func(r v3.Resource, rv string, edit func(v3.Resource)) v3.Resource {
		c := r.DeepCopyObject().(v3.Resource)
		c.SetResourceVersion(rv)
		if edit != nil {
			edit(c)
		}
		return c
	}
	relabel := func(r v3.Resource) { r.SetLabels(map[string]string{"a": "c"}) }
	for _, tc := range []struct {
		name string
		a, b v3.Resource
		want bool
	}{
		{"node, version only", node, at(node, "2", nil), true},
		{"node, relabelled", node, at(node, "2", relabel), false},
		{"node, same version", node, at(node, "1", nil), false},
		{"endpoint, version only", wep, at(wep, "2", nil), true},
		{"policy, version only", pol, at(pol, "2", nil), false},
		{"nil", nil, node, false},
	} {
		if got := VersionOnlyChange(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if node.ResourceVersion != "1" {
		t.Error("the first resource was changed")
	}
}

// TestWatchSyncerRelistDeliversOnlyDifferences drives the syncer through
// a lost watch history: the relist must deliver exactly what changed, the
// same whether the syncer keeps the objects or (Lean) only their
// versions; a lean syncer's deletions carry no object.
func TestWatchSyncerRelistDeliversOnlyDifferences(t *testing.T) {
	for _, lean := range []bool{false, true} {
		t.Run(fmt.Sprintf("lean=%v", lean), func(t *testing.T) {
			f := newFakeStore()
			f.put("a")
			f.put("b")
			f.put("c")
			cb := &logCallbacks{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := NewWatchSyncer(f, []string{v3.KindIPPool}, cb, Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond})
			if lean {
				s.Lean()
			}
			done := make(chan struct{})
			go func() { s.Run(ctx); close(done) }()

			w1 := nextWatch(t, f)
			if got := cb.waitLen(t, 5); got != "WaitForDatastore; Added a; Added b; Added c; InSync" {
				t.Fatalf("snapshot: %s", got)
			}
			// A live change, then history is lost while b changes, c goes and d comes.
			w1 <- Event{Type: EventAdded, Object: f.put("x")}
			cb.waitLen(t, 6)
			f.put("b")
			f.remove("c")
			f.put("d")
			w1 <- Event{Type: EventError, Err: ErrRevisionGone}
			nextWatch(t, f)
			got := cb.waitLen(t, 9)
			deleted := "Deleted c (last state 3)"
			if lean {
				deleted = "Deleted c"
			}
			want := "WaitForDatastore; Added a; Added b; Added c; InSync; Added x; Modified b; " + deleted + "; Added d"
			if got != want {
				t.Fatalf("after relist:\n got %s\nwant %s", got, want)
			}
			cancel()
			<-done
		})
	}
}

// TestWatchSyncerRetriesWhileStoreDown: list failures are retried with
// backoff and the syncer stays WaitForDatastore until a list succeeds.
func TestWatchSyncerRetriesWhileStoreDown(t *testing.T) {
	f := newFakeStore()
	f.put("a")
	f.listErr = &UnavailableError{Endpoints: []string{"http://127.0.0.1:1"}, Err: errors.New("connection refused")}
	cb := &logCallbacks{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewWatchSyncer(f, []string{v3.KindIPPool}, cb, Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond})
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		n := f.lists
		f.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("syncer did not retry its list")
		}
		time.Sleep(time.Millisecond)
	}
	if got := cb.waitLen(t, 1); got != "WaitForDatastore" {
		t.Fatalf("while down: %s", got)
	}
	f.mu.Lock()
	f.listErr = nil
	f.mu.Unlock()
	nextWatch(t, f)
	if got := cb.waitLen(t, 3); got != "WaitForDatastore; Added a; InSync" {
		t.Fatalf("after recovery: %s", got)
	}
	cancel()
	<-done
}

// TestWatchSyncerSkipsUndecodableRecords: an undecodable record neither
// stops the kind's watch nor fails its relist; it is counted once per
// revision; a good record turning bad is delivered as Deleted, and one
// fixed later as Added.
func TestWatchSyncerSkipsUndecodableRecords(t *testing.T) {
	f := newFakeStore()
	f.put("a")
	f.putBad("b")
	f.put("c")
	count := func() float64 { return float64(UndecodableRecords(v3.KindIPPool)) }
	before := count()
	cb := &logCallbacks{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewWatchSyncer(f, []string{v3.KindIPPool}, cb, Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond})
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()

	w1 := nextWatch(t, f)
	if got := cb.waitLen(t, 4); got != "WaitForDatastore; Added a; Added c; InSync" {
		t.Fatalf("snapshot: %s", got)
	}
	// A new bad record, then the good a turns bad: a is deleted; the
	// watch goes on (d arrives).
	bd := f.putBad("d")
	w1 <- Event{Type: EventUndecodable, Bad: &bd}
	ba := f.putBad("a")
	w1 <- Event{Type: EventUndecodable, Bad: &ba}
	w1 <- Event{Type: EventAdded, Object: f.put("e")}
	if got := cb.waitLen(t, 6); got != "WaitForDatastore; Added a; Added c; InSync; Deleted a (last state 1); Added e" {
		t.Fatalf("after bad records: %s", got)
	}
	// A relist meets the same bad records: nothing new is counted. b is
	// fixed meanwhile and appears.
	f.put("b")
	w1 <- Event{Type: EventError, Err: ErrRevisionGone}
	nextWatch(t, f)
	if got := cb.waitLen(t, 7); got != "WaitForDatastore; Added a; Added c; InSync; Deleted a (last state 1); Added e; Added b" {
		t.Fatalf("after relist: %s", got)
	}
	if got := count() - before; got != 3 {
		t.Errorf("counted %v undecodable records, want 3 (b, d, a: each once)", got)
	}
	if n := s.bad.Bad(); n != 2 {
		t.Errorf("%d records known bad, want 2 (a, d)", n)
	}
	cancel()
	<-done
}

// pagedStore lists in pages of two. With fail > 0, the first ListPages
// fails after that many pages; the next list then waits for resume.
type pagedStore struct {
	*fakeStore
	fail   int
	failed chan struct{} // closed when the first ListPages failed
	resume chan struct{} // closed by the test to let the next list go on
}

func (p *pagedStore) List(ctx context.Context, kind string, o ListOptions) (*List, error) {
	select {
	case <-p.failed:
		<-p.resume
	default:
	}
	return p.fakeStore.List(ctx, kind, o)
}

func (p *pagedStore) ListPages(ctx context.Context, kind string, _ int, page func(*List) error) error {
	l, err := p.List(ctx, kind, ListOptions{})
	if err != nil {
		return err
	}
	pages := 0
	for from := 0; from < len(l.Items); from += 2 {
		if p.fail > 0 && pages == p.fail {
			close(p.failed)
			return errors.New("connection lost mid-list")
		}
		pages++
		if err := page(&List{Items: l.Items[from:min(from+2, len(l.Items))], Revision: l.Revision, Total: len(l.Items)}); err != nil {
			return err
		}
	}
	return nil
}

// TestWatchSyncerFirstListInPages: from a client that lists in pages, the
// first list is delivered page by page, before InSync, after its size
// (SnapshotSizer); when it fails half way, the next list is compared with
// what the pages delivered (what went meanwhile is deleted, nothing is
// delivered twice).
func TestWatchSyncerFirstListInPages(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail int
		want string
	}{
		{"whole", 0, "WaitForDatastore; Size IPPool 5; Added a; Added b; Added c; Added d; Added e; InSync"},
		// The list after the failure is compared whole: no size again.
		{"fails after two pages", 2, "WaitForDatastore; Size IPPool 5; Added a; Added b; Added c; Added d; Deleted a; Added e; Added f; InSync"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &pagedStore{fakeStore: newFakeStore(), fail: tc.fail, failed: make(chan struct{}), resume: make(chan struct{})}
			for _, n := range []string{"a", "b", "c", "d", "e"} {
				f.put(n)
			}
			cb := &logCallbacks{}
			emits := 0
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := NewWatchSyncer(f, []string{v3.KindIPPool}, &countingCallbacks{logCallbacks: cb, emits: &emits}, Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}).Lean()
			done := make(chan struct{})
			go func() { s.Run(ctx); close(done) }()
			if tc.fail > 0 {
				<-f.failed
				f.remove("a")
				f.put("f")
				close(f.resume)
			}
			nextWatch(t, f.fakeStore)
			n := strings.Count(tc.want, ";") + 1
			if got := cb.waitLen(t, n); got != tc.want {
				t.Fatalf("delivered:\n got %s\nwant %s", got, tc.want)
			}
			cb.mu.Lock()
			if tc.fail == 0 && emits < 3 {
				t.Errorf("%d deliveries: the pages were not delivered one by one", emits)
			}
			cb.mu.Unlock()
			cancel()
			<-done
		})
	}
}

type countingCallbacks struct {
	*logCallbacks
	emits *int
}

// OnSnapshotSize makes countingCallbacks a SnapshotSizer, logging the
// sizes announced.
func (c *countingCallbacks) OnSnapshotSize(kind string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, fmt.Sprintf("Size %s %d", kind, n))
}

func (c *countingCallbacks) OnUpdates(ups []Update) {
	c.mu.Lock()
	*c.emits++
	c.mu.Unlock()
	c.logCallbacks.OnUpdates(ups)
}
