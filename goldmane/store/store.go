package store

import (
	"slices"
	"sync"
	"time"

	"github.com/tabbynet/tabby/goldmane/proto"
	gproto "google.golang.org/protobuf/proto"
)

// Config bounds the store.
type Config struct {
	// Interval is the aggregation interval (Calico's 15 s); Retention how
	// long flows are kept (an hour).
	Interval, Retention time.Duration
	// MaxKeys and MaxWindows bound memory: flow keys, and key-intervals.
	MaxKeys, MaxWindows int
}

// Defaults: Calico's interval and an hour; about 100 MiB at the bounds.
func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 15 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = time.Hour
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = 100_000
	}
	if c.MaxWindows <= 0 {
		c.MaxWindows = 1_000_000
	}
	return c
}

// Stats are one key's counts over an interval (or a sum of intervals).
type Stats struct {
	PacketsIn, PacketsOut, BytesIn, BytesOut int64
	Started, Completed, Live                 int64
}

func (s *Stats) add(f *proto.Flow) {
	s.PacketsIn += f.PacketsIn
	s.PacketsOut += f.PacketsOut
	s.BytesIn += f.BytesIn
	s.BytesOut += f.BytesOut
	s.Started += f.NumConnectionsStarted
	s.Completed += f.NumConnectionsCompleted
	s.Live += f.NumConnectionsLive
}

func (s *Stats) sum(o Stats) {
	s.PacketsIn += o.PacketsIn
	s.PacketsOut += o.PacketsOut
	s.BytesIn += o.BytesIn
	s.BytesOut += o.BytesOut
	s.Started += o.Started
	s.Completed += o.Completed
	s.Live += o.Live
}

type window struct {
	start int64 // seconds, a multiple of the interval
	stats Stats
}

// series is one flow key over time.
type series struct {
	id      int64
	key     Key
	proto   *proto.FlowKey // the key as received (policies decoded once)
	windows []window       // oldest first
	dirty   bool           // changed since the last Rollover
}

// Dropped counts what the bounds or the retention turned away.
type Dropped struct {
	// Keys: flows of a new key past MaxKeys; Windows: past MaxWindows;
	// Old: flows older than the retention; Repeats: flows a node sent
	// again after reconnecting (not dropped for a bound: already counted).
	Keys, Windows, Old, Repeats int64
}

// Store keeps the flows. Safe for concurrent use.
type Store struct {
	cfg Config

	mu      sync.Mutex
	keys    map[Key]*series
	windows int
	nextID  int64
	// seen are the flows received per source (a node's connection
	// identity), to drop repeats; expired with their windows.
	seen    map[seenKey]struct{}
	dropped Dropped
	subs    map[*Subscription]struct{}
}

type seenKey struct {
	source string
	sum    [32]byte
}

// New returns an empty store.
func New(cfg Config) *Store {
	return &Store{cfg: cfg.withDefaults(), keys: map[Key]*series{}, seen: map[seenKey]struct{}{},
		subs: map[*Subscription]struct{}{}}
}

// Interval is the aggregation interval.
func (s *Store) Interval() time.Duration { return s.cfg.Interval }

func (s *Store) bucket(t int64) int64 {
	iv := int64(s.cfg.Interval / time.Second)
	if iv <= 0 {
		iv = 1
	}
	return t - ((t%iv)+iv)%iv
}

func (s *Store) oldest(now time.Time) int64 {
	return s.bucket(now.Add(-s.cfg.Retention).Unix())
}

// Add takes one flow from source (the sending node's identity). It
// returns false when the flow was not kept: a repeat of one source
// already sent, older than the retention, or past a bound.
func (s *Store) Add(source string, f *proto.Flow, now time.Time) bool {
	if f == nil || f.Key == nil {
		return false
	}
	sk := seenKey{source: source, sum: fingerprint(f)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[sk]; ok {
		s.dropped.Repeats++
		return false
	}
	start := s.bucket(f.StartTime)
	if start < s.oldest(now) {
		s.dropped.Old++
		return false
	}
	if cur := s.bucket(now.Unix()); start > cur {
		start = cur // a node's clock ahead: the current interval
	}
	k := KeyOf(f.Key)
	sr := s.keys[k]
	if sr == nil {
		if len(s.keys) >= s.cfg.MaxKeys {
			s.dropped.Keys++
			return false
		}
		s.nextID++
		sr = &series{id: s.nextID, key: k, proto: cloneKey(f.Key)}
		s.keys[k] = sr
	}
	i, found := slices.BinarySearchFunc(sr.windows, start, func(w window, t int64) int { return int(w.start - t) })
	if !found {
		if s.windows >= s.cfg.MaxWindows {
			s.dropped.Windows++
			if len(sr.windows) == 0 {
				delete(s.keys, k)
			}
			return false
		}
		sr.windows = slices.Insert(sr.windows, i, window{start: start})
		s.windows++
	}
	sr.windows[i].stats.add(f)
	sr.dirty = true
	s.seen[sk] = struct{}{}
	return true
}

// fingerprint identifies a flow's content (deterministic encoding).
func fingerprint(f *proto.Flow) [32]byte {
	b, _ := gproto.MarshalOptions{Deterministic: true}.Marshal(f)
	return sha256Sum(b)
}

func cloneKey(k *proto.FlowKey) *proto.FlowKey {
	return gproto.Clone(k).(*proto.FlowKey)
}

// Dropped returns the counts of flows not kept.
func (s *Store) Dropped() Dropped {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Size returns the keys and key-intervals kept.
func (s *Store) Size() (keys, windows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys), s.windows
}

// Rollover closes an interval: it sends every key changed since the last
// Rollover to the subscribers (its latest interval's totals), expires
// what is older than the retention, and forgets the repeats of expired
// flows. Call it once per Interval.
func (s *Store) Rollover(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var changed []*proto.FlowResult
	oldest := s.oldest(now)
	for k, sr := range s.keys {
		if sr.dirty {
			sr.dirty = false
			last := sr.windows[len(sr.windows)-1]
			changed = append(changed, s.result(sr, last.start, last.start+s.ivSeconds(), last.stats))
		}
		n := 0
		for n < len(sr.windows) && sr.windows[n].start < oldest {
			n++
		}
		if n > 0 {
			sr.windows = slices.Delete(sr.windows, 0, n)
			s.windows -= n
		}
		if len(sr.windows) == 0 {
			delete(s.keys, k)
		}
	}
	if len(s.seen) > 0 && len(s.keys) == 0 {
		clear(s.seen)
	} else if len(s.seen) > 4*s.windows+1024 {
		// The repeats only matter shortly after a reconnection; past
		// this many, the oldest cannot be told apart, so start again.
		clear(s.seen)
	}
	sortResults(changed)
	s.publish(changed)
}

func (s *Store) ivSeconds() int64 { return int64(s.cfg.Interval / time.Second) }

// result builds a FlowResult for a key over [start, end).
func (s *Store) result(sr *series, start, end int64, st Stats) *proto.FlowResult {
	return &proto.FlowResult{Id: sr.id, Flow: &proto.Flow{
		Key: sr.proto, StartTime: start, EndTime: end,
		PacketsIn: st.PacketsIn, PacketsOut: st.PacketsOut, BytesIn: st.BytesIn, BytesOut: st.BytesOut,
		NumConnectionsStarted: st.Started, NumConnectionsCompleted: st.Completed, NumConnectionsLive: st.Live,
	}}
}
