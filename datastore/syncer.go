package datastore

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// SyncStatus is where a syncer is in its life.
type SyncStatus string

const (
	// StatusWaitForDatastore: no complete snapshot yet (store unreachable
	// or first lists still running).
	StatusWaitForDatastore SyncStatus = "WaitForDatastore"
	// StatusInSync: every kind's snapshot has been delivered; updates
	// follow as they happen.
	StatusInSync SyncStatus = "InSync"
)

// Update is one change delivered by a syncer. For UpdateDeleted, Object
// is the last known state.
type Update struct {
	Type   EventType // EventAdded, EventModified or EventDeleted
	Key    Key
	Object v3.Resource
}

// SyncerCallbacks receive a syncer's output. Calls are serialised: never
// two at once. Updates for one key arrive in the order they happened.
type SyncerCallbacks interface {
	OnStatusUpdated(SyncStatus)
	OnUpdates([]Update)
}

// SnapshotSizer is implemented by syncer callbacks that prepare for a
// large snapshot: before the pages of a kind's first list are delivered,
// OnSnapshotSize says how many objects the list holds (when the client
// knows: an etcd range counts its keys).
type SnapshotSizer interface {
	OnSnapshotSize(kind string, n int)
}

// Syncer delivers a consistent view of some kinds to a long-running
// consumer.
type Syncer interface {
	// Run delivers the snapshot, then updates, until ctx ends.
	Run(ctx context.Context)
}

// Backoff bounds the retry delay of syncers after an error.
type Backoff struct {
	Initial, Max time.Duration
}

func (b Backoff) next(cur time.Duration) time.Duration {
	if cur == 0 {
		cur = b.Initial
	} else {
		cur *= 2
	}
	if cur > b.Max {
		cur = b.Max
	}
	return cur
}

// jittered returns d ± 20%, so many syncers do not retry in lockstep.
func jittered(d time.Duration) time.Duration {
	return d - d/5 + time.Duration(rand.Int64N(int64(d)/5*2+1))
}

// DefaultBackoff is used when a syncer is given none.
var DefaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}

// WatchSyncer is a Syncer over any Client's List and Watch: per kind it
// lists, delivers the difference from what it delivered before, then
// watches from the list's revision. When the watch fails (revision
// compacted, store down) it relists with backoff and again delivers only
// the difference, so consumers never see a spurious delete/re-add.
//
// A stored record that cannot be decoded (List.Bad, EventUndecodable) is
// skipped: the rest of its kind keeps flowing. It is logged and counted
// once per key and revision (BadRecordReporter). A record that turns bad
// after it was delivered is delivered as Deleted, as Calico's
// watchersyncer does on a parse failure: consumers see only what the
// store holds in a form they can use, and what they computed from the
// record's old content would otherwise be enforced indefinitely for a
// record that no longer says it. When the record is fixed it is delivered
// as Added again.
//
// A Node or WorkloadEndpoint change that leaves the delivered resource as
// it was but for its version (VersionOnlyChange: a Node's status heartbeat
// on the Kubernetes datastore) is not delivered; a Lean syncer, holding no
// objects, delivers it.
//
// One goroutine runs per kind; the callbacks are serialised by a mutex.
type WatchSyncer struct {
	client  Client
	kinds   []string
	cb      SyncerCallbacks
	backoff Backoff
	bad     BadRecordReporter
	lean    bool // keep only resource versions (see Lean)

	mu       sync.Mutex // serialises callbacks and guards below
	synced   map[string]bool
	inSync   bool
	statusTx SyncStatus
}

// NewWatchSyncer returns a syncer for kinds over client.
func NewWatchSyncer(client Client, kinds []string, cb SyncerCallbacks, backoff Backoff) *WatchSyncer {
	if backoff.Initial == 0 {
		backoff = DefaultBackoff
	}
	return &WatchSyncer{client: client, kinds: kinds, cb: cb, backoff: backoff, synced: map[string]bool{}}
}

// Lean makes the syncer keep only the resource version of each object
// delivered, not the object, and returns it; call it before Run. Deleted
// updates then carry no Object (only the Key). For a consumer that keeps
// what it needs of the objects itself: at cluster scale the syncer's copy
// of every endpoint would otherwise be most of the consumer's memory.
func (s *WatchSyncer) Lean() *WatchSyncer {
	s.lean = true
	return s
}

// cached is what the syncer keeps of a delivered object.
type cached struct {
	rv  string
	obj v3.Resource // nil when lean
}

func (s *WatchSyncer) entry(o v3.Resource) cached {
	if s.lean {
		return cached{rv: o.GetResourceVersion()}
	}
	return cached{rv: o.GetResourceVersion(), obj: o}
}

// Run implements Syncer.
func (s *WatchSyncer) Run(ctx context.Context) {
	s.setStatus(StatusWaitForDatastore)
	var wg sync.WaitGroup
	for _, kind := range s.kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.runKind(ctx, kind)
		}()
	}
	wg.Wait()
}

func (s *WatchSyncer) setStatus(st SyncStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statusTx == st {
		return
	}
	s.statusTx = st
	s.cb.OnStatusUpdated(st)
}

func (s *WatchSyncer) emit(ups []Update) {
	if len(ups) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cb.OnUpdates(ups)
}

func (s *WatchSyncer) markSynced(kind string) {
	s.mu.Lock()
	s.synced[kind] = true
	all := len(s.synced) == len(s.kinds)
	s.mu.Unlock()
	if all {
		s.setStatus(StatusInSync)
	}
}

// runKind owns the cache for one kind: what has been delivered, by key.
func (s *WatchSyncer) runKind(ctx context.Context, kind string) {
	cache := map[Key]cached{}
	bad := map[Key]bool{} // keys whose last state seen is undecodable
	var delay time.Duration
	for ctx.Err() == nil {
		list, paged, err := s.list(ctx, kind, &cache)
		if err != nil {
			slog.Warn("syncer cannot list; retrying", "kind", kind, "err", err)
			delay = s.backoff.next(delay)
			sleep(ctx, jittered(delay))
			continue
		}
		s.emit(s.diffSnapshot(cache, list.Items, paged))
		s.listedBad(bad, list.Bad)
		s.markSynced(kind)

		err = s.watch(ctx, kind, list.Revision, cache, bad)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrRevisionGone) {
			delay = 0 // relist at once: the store is up
			continue
		}
		slog.Warn("syncer watch ended; relisting", "kind", kind, "err", err)
		delay = s.backoff.next(delay)
		sleep(ctx, jittered(delay))
	}
}

// listPageSize is the page of a first list from a PageLister.
const listPageSize = 5000

// list lists kind. The first list (nothing delivered yet) from a client
// that lists in pages delivers each page as it comes, so that the
// consumer works on the first objects while the rest are read and
// decoded (a cluster's endpoints are hundreds of thousands); the List
// returned then holds no items (they are delivered and cached) but every
// page's bad records, and paged is true.
// A later list is compared with what was delivered, whole.
// When the first page says how many records the list holds, the cache is
// made that large at once and a SnapshotSizer consumer is told.
func (s *WatchSyncer) list(ctx context.Context, kind string, cache *map[Key]cached) (_ *List, paged bool, _ error) {
	pl, ok := s.client.(PageLister)
	if !ok || len(*cache) > 0 {
		l, err := s.client.List(ctx, kind, ListOptions{})
		return l, false, err
	}
	var out List
	first := true
	err := pl.ListPages(ctx, kind, listPageSize, func(p *List) error {
		if first && p.Total > len(p.Items) && len(*cache) == 0 {
			*cache = make(map[Key]cached, p.Total)
			if sz, ok := s.cb.(SnapshotSizer); ok {
				s.mu.Lock()
				sz.OnSnapshotSize(kind, p.Total)
				s.mu.Unlock()
			}
		}
		first = false
		s.emit(s.diffSnapshot(*cache, p.Items, true))
		out.Revision = p.Revision
		out.Bad = append(out.Bad, p.Bad...)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return &out, true, nil
}

// watch follows changes after rev until the watch fails, keeping cache
// current. It returns the error that ended the watch.
func (s *WatchSyncer) watch(ctx context.Context, kind, rev string, cache map[Key]cached, bad map[Key]bool) error {
	w, err := s.client.Watch(ctx, kind, WatchOptions{Revision: rev})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		var ev Event
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return errors.New("watch closed")
		}
		if ev.Type == EventError {
			return ev.Err
		}
		if ev.Type == EventUndecodable {
			if ev.Bad == nil {
				continue
			}
			s.seenBad(bad, *ev.Bad)
			k := ev.Bad.Key
			if old, ok := cache[k]; ok {
				// It was good: consumers drop it (see WatchSyncer).
				delete(cache, k)
				s.emit([]Update{{Type: EventDeleted, Key: k, Object: old.obj}})
			}
			continue
		}
		if ev.Object == nil {
			continue
		}
		k := KeyOf(ev.Object)
		if bad[k] {
			delete(bad, k)
			s.bad.Gone(k.String())
		}
		switch ev.Type {
		case EventDeleted:
			if _, ok := cache[k]; !ok {
				continue
			}
			delete(cache, k)
		case EventAdded, EventModified:
			typ := EventAdded
			old, ok := cache[k]
			if ok {
				typ = EventModified
			}
			cache[k] = s.entry(ev.Object)
			if VersionOnlyChange(old.obj, ev.Object) { // nil when new or lean: false
				continue // a write the resource does not show
			}
			ev.Type = typ
		}
		s.emit([]Update{{Type: ev.Type, Key: k, Object: ev.Object}})
	}
}

// listedBad reports the undecodable records of a list and forgets those
// no longer bad (fixed, or deleted).
func (s *WatchSyncer) listedBad(bad map[Key]bool, listed []BadRecord) {
	now := make(map[Key]bool, len(listed))
	for _, b := range listed {
		now[b.Key] = true
		s.seenBad(bad, b)
	}
	for k := range bad {
		if !now[k] {
			delete(bad, k)
			s.bad.Gone(k.String())
		}
	}
}

func (s *WatchSyncer) seenBad(bad map[Key]bool, b BadRecord) {
	bad[b.Key] = true
	s.bad.Seen(b.Key.String(), b)
}

// diffSnapshot updates cache to items and returns the updates that take a
// consumer from the old cache to the new one, in key order. With partial,
// items are one page of a list: nothing is deleted.
func (s *WatchSyncer) diffSnapshot(cache map[Key]cached, items []v3.Resource, partial bool) []Update {
	var ups []Update
	var seen map[Key]bool // what a whole list holds (a page deletes nothing)
	if !partial {
		seen = make(map[Key]bool, len(items))
	}
	for _, it := range items {
		k := KeyOf(it)
		if seen != nil {
			seen[k] = true
		}
		old, ok := cache[k]
		switch {
		case !ok:
			ups = append(ups, Update{Type: EventAdded, Key: k, Object: it})
		case old.rv != it.GetResourceVersion() && !VersionOnlyChange(old.obj, it):
			ups = append(ups, Update{Type: EventModified, Key: k, Object: it})
		default:
			continue
		}
		cache[k] = s.entry(it)
	}
	if partial {
		sortUpdates(ups)
		return ups
	}
	for k, old := range cache {
		if !seen[k] {
			ups = append(ups, Update{Type: EventDeleted, Key: k, Object: old.obj})
			delete(cache, k)
		}
	}
	sortUpdates(ups)
	return ups
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
