package syncserver

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// binarySnapshots is one syncer type's compressed snapshot, encoded once
// and sent as is to every client that connects while it is fresh: until
// the chain moves past it, and for at least SnapshotValidity (Calico's
// BinarySnapshotTimeout) even if it does, so that a crowd of clients
// reconnecting during churn costs one encoding a second, not one each.
// A client sent an older snapshot catches up from its crumb. A snapshot
// is dropped once both have passed, so it never keeps the chain behind it
// alive.
type binarySnapshots struct {
	cache    *snapcache.Cache
	maxMsg   int
	validity time.Duration

	generated, reused prometheus.Counter
	rawBytes, bytes   prometheus.Gauge

	mu  sync.Mutex
	cur *binarySnapshot
}

type binarySnapshot struct {
	syncproto.BinarySnapshot
	crumb  *snapcache.Breadcrumb // the client follows from here
	status syncproto.SyncStatus  // the status it carries
	made   time.Time
}

func newBinarySnapshots(syncer string, cache *snapcache.Cache, cfg Config, m *metrics) *binarySnapshots {
	return &binarySnapshots{cache: cache, maxMsg: snapshotMessageSize, validity: cfg.SnapshotValidity,
		generated: m.snapsGenerated.WithLabelValues(syncer), reused: m.snapsReused.WithLabelValues(syncer),
		rawBytes: m.snapRawBytes.WithLabelValues(syncer), bytes: m.snapBytes.WithLabelValues(syncer)}
}

// snapshotMessageSize is the keys per MsgKVs in a binary snapshot
// (Calico's: bigger than the deltas' messages).
const snapshotMessageSize = 1000

// get returns a fresh snapshot, encoding one if needed. Clients asking
// while one is encoded wait for it.
func (b *binarySnapshots) get() (*binarySnapshot, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur != nil {
		b.reused.Inc()
		return b.cur, nil
	}
	snap := b.cache.Snapshot()
	enc, err := syncproto.EncodeBinarySnapshot(snap.KVs, snap.Status, b.maxMsg)
	if err != nil {
		return nil, err
	}
	cur := &binarySnapshot{BinarySnapshot: enc, crumb: snap.Crumb, status: snap.Status}
	b.cur = cur
	time.AfterFunc(b.validity, func() {
		<-cur.crumb.Ready()
		b.drop(cur)
	})
	b.generated.Inc()
	b.rawBytes.Set(float64(enc.RawBytes))
	b.bytes.Set(float64(len(enc.Bytes)))
	return b.cur, nil
}

// drop forgets cur if it is still the one handed out.
func (b *binarySnapshots) drop(cur *binarySnapshot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur == cur {
		b.cur = nil
	}
}
