// Package snapcache is Typha's copy of one syncer's output: the current
// value of every key (the snapshot a new client is sent) and a chain of
// breadcrumbs (each the updates of one syncer callback, and the status
// after them), which every connected client follows from the crumb its
// snapshot was taken at. Every update is serialised once, here, and the
// bytes are shared by all clients; a client holds only a pointer into the
// chain, so Typha's memory per client is its connection's buffers. The
// chain is dropped behind the slowest client by the garbage collector;
// the server disconnects a client that falls too far behind (its crumb
// older than MaxFallBehind), so a stuck client cannot grow memory.
//
// Cache implements datastore.SyncerCallbacks. Safe for concurrent use.
package snapcache

import (
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// Breadcrumb is one step of the chain. Its fields never change after it
// is published; Next blocks until the following crumb exists.
type Breadcrumb struct {
	Seq     uint64
	Time    time.Time
	Updates []syncproto.SerializedUpdate
	Status  syncproto.SyncStatus

	next  *Breadcrumb
	ready chan struct{} // closed when next is set
}

// Next returns the following crumb once it exists, or nil when done is
// closed first.
func (b *Breadcrumb) Next(done <-chan struct{}) *Breadcrumb {
	select {
	case <-b.ready:
		return b.next
	case <-done:
		return nil
	}
}

// Ready is closed once the following crumb exists.
func (b *Breadcrumb) Ready() <-chan struct{} { return b.ready }

// Snapshot is what a new client is sent first.
type Snapshot struct {
	KVs    []syncproto.SerializedUpdate // every current key, in key order
	Status syncproto.SyncStatus
	// Crumb is the crumb the snapshot includes: the client follows
	// Crumb.Next from here.
	Crumb *Breadcrumb
}

// Metrics is told of the cache's size and updates (may be nil).
type Metrics interface {
	Updates(n int)
	Size(n int)
}

// Cache is one syncer type's snapshot and chain.
type Cache struct {
	name    string
	now     func() time.Time
	log     *slog.Logger
	metrics Metrics

	mu     sync.Mutex
	kvs    map[string]syncproto.SerializedUpdate
	kinds  map[string]int // keys per kind
	status syncproto.SyncStatus
	tail   *Breadcrumb
}

// New returns an empty cache for syncer type name.
func New(name string, now func() time.Time, log *slog.Logger, m Metrics) *Cache {
	if log == nil {
		log = slog.Default()
	}
	return &Cache{name: name, now: now, log: log, metrics: m, kvs: map[string]syncproto.SerializedUpdate{}, kinds: map[string]int{},
		tail: &Breadcrumb{Time: now(), ready: make(chan struct{})}}
}

// OnStatusUpdated implements datastore.SyncerCallbacks.
func (c *Cache) OnStatusUpdated(s datastore.SyncStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := syncproto.FromDatastore(s)
	if st == c.status {
		return
	}
	c.status = st
	c.publish(nil)
}

// OnUpdates implements datastore.SyncerCallbacks.
func (c *Cache) OnUpdates(ups []datastore.Update) {
	out := make([]syncproto.SerializedUpdate, 0, len(ups))
	for _, u := range ups {
		su, err := syncproto.Serialize(u)
		if err != nil {
			// Sent as a deletion: clients drop what they cannot be told.
			c.log.Error("cannot serialise an update; sending it as a deletion", "syncer", c.name, "key", u.Key, "error", err)
			su = syncproto.SerializedUpdate{Key: su.Key, UpdateType: syncproto.UpdateTypeKVDeleted}
		}
		out = append(out, su)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, su := range out {
		_, had := c.kvs[su.Key]
		kind, _, _ := strings.Cut(su.Key, "/")
		if su.Deleted() {
			delete(c.kvs, su.Key)
			if had {
				c.kinds[kind]--
			}
		} else {
			c.kvs[su.Key] = su
			if !had {
				c.kinds[kind]++
			}
		}
	}
	c.publish(out)
	if c.metrics != nil {
		c.metrics.Updates(len(out))
		c.metrics.Size(len(c.kvs))
	}
}

// publish appends a crumb (under mu).
func (c *Cache) publish(ups []syncproto.SerializedUpdate) {
	b := &Breadcrumb{Seq: c.tail.Seq + 1, Time: c.now(), Updates: ups, Status: c.status, ready: make(chan struct{})}
	c.tail.next = b
	close(c.tail.ready)
	c.tail = b
}

// Snapshot returns the current keys and the crumb to follow.
func (c *Cache) Snapshot() Snapshot {
	c.mu.Lock()
	kvs := make([]syncproto.SerializedUpdate, 0, len(c.kvs))
	for _, su := range c.kvs {
		kvs = append(kvs, su)
	}
	s := Snapshot{Status: c.status, Crumb: c.tail}
	c.mu.Unlock()
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].Key < kvs[j].Key })
	s.KVs = kvs
	return s
}

// Count is the number of keys of kind, and whether the cache is in sync
// with the datastore (the count is then the datastore's).
func (c *Cache) Count(kind string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kinds[kind], c.status == syncproto.StatusInSync
}

// Status is the cache's current status.
func (c *Cache) Status() syncproto.SyncStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}
