package storefuzz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// rawStore is a datastore.Client over raw stored values, read the way the
// etcd client reads them (etcd.DecodeRecord): every List decodes what is
// stored, and each kind's watch is a channel the test feeds.
type rawStore struct {
	mu      sync.Mutex
	rev     int64
	records map[string]rawRecord // etcd key -> record
	watches map[string]chan datastore.Event
}

type rawRecord struct {
	kind  string
	value []byte
	rev   int64
}

func newRawStore() *rawStore {
	s := &rawStore{records: map[string]rawRecord{}, watches: map[string]chan datastore.Event{}}
	for _, k := range kinds {
		s.watches[k] = make(chan datastore.Event, 64)
	}
	return s
}

func (s *rawStore) put(k datastore.Key, value []byte) (string, int64, error) {
	key, err := etcd.KeyOf(k)
	if err != nil {
		return "", 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.records[key] = rawRecord{kind: k.Kind, value: value, rev: s.rev}
	return key, s.rev, nil
}

// event is what a watch would deliver for a put of value at k.
func (s *rawStore) event(k datastore.Key, value []byte) datastore.Event {
	key, rev, err := s.put(k, value)
	if err != nil {
		panic(err)
	}
	obj, err := etcd.DecodeRecord(k.Kind, key, value, rev)
	var bad datastore.BadRecord
	if errors.As(err, &bad) {
		return datastore.Event{Type: datastore.EventUndecodable, Bad: &bad, Revision: strconv.FormatInt(rev, 10)}
	}
	return datastore.Event{Type: datastore.EventModified, Object: obj, Revision: strconv.FormatInt(rev, 10)}
}

func (s *rawStore) List(_ context.Context, kind string, _ datastore.ListOptions) (*datastore.List, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &datastore.List{Revision: strconv.FormatInt(s.rev, 10)}
	for key, r := range s.records {
		if r.kind != kind {
			continue
		}
		obj, err := etcd.DecodeRecord(kind, key, r.value, r.rev)
		var bad datastore.BadRecord
		switch {
		case errors.As(err, &bad):
			l.Bad = append(l.Bad, bad)
		case err != nil:
			return nil, err
		default:
			l.Items = append(l.Items, obj)
		}
	}
	datastore.Sort(l.Items)
	return l, nil
}

type chanWatcher chan datastore.Event

func (w chanWatcher) ResultChan() <-chan datastore.Event { return w }
func (w chanWatcher) Stop()                              {}

func (s *rawStore) Watch(_ context.Context, kind string, _ datastore.WatchOptions) (datastore.Watcher, error) {
	return chanWatcher(s.watches[kind]), nil
}

func (s *rawStore) Create(context.Context, v3.Resource) (v3.Resource, error) {
	return nil, errors.ErrUnsupported
}
func (s *rawStore) Update(context.Context, v3.Resource) (v3.Resource, error) {
	return nil, errors.ErrUnsupported
}
func (s *rawStore) Delete(context.Context, datastore.Key, datastore.DeleteOptions) (v3.Resource, error) {
	return nil, errors.ErrUnsupported
}
func (s *rawStore) Get(context.Context, datastore.Key) (v3.Resource, error) {
	return nil, errors.ErrUnsupported
}
func (s *rawStore) Close() error { return nil }

// kinds are the kinds felix's policy path follows (daemon.Kinds, which
// this package does not import: the daemon brings client-go, whose
// coverage instrumentation makes fuzzing crawl).
var kinds = []string{
	v3.KindWorkloadEndpoint, v3.KindHostEndpoint, v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy,
	v3.KindTier, v3.KindProfile, v3.KindNetworkSet, v3.KindGlobalNetworkSet, v3.KindFelixConfiguration,
}

// view is what a consumer of the syncer holds, as felix's daemon does:
// the delivered objects by key; it counts the marker objects that went
// through.
type view struct {
	mu      sync.Mutex
	objs    map[datastore.Key]v3.Resource
	inSync  bool
	markers int
}

func (v *view) OnStatusUpdated(s datastore.SyncStatus) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.inSync = s == datastore.StatusInSync
}

func (v *view) OnUpdates(ups []datastore.Update) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, u := range ups {
		if u.Type == datastore.EventDeleted {
			delete(v.objs, u.Key)
		} else {
			v.objs[u.Key] = u.Object
		}
		if u.Key.Name == "zz-marker" {
			v.markers++
		}
	}
}

// scenarioKeys are the keys of the calc scenario's objects: fuzzed
// records may land on them (a good record turning bad, or changing).
var scenarioKeys = func() []datastore.Key {
	var out []datastore.Key
	for _, o := range ct.Scenario() {
		out = append(out, datastore.KeyOf(o.(v3.Resource)))
	}
	return out
}()

// FuzzStoredRecords feeds arbitrary bytes as stored records (at keys of
// felix's kinds, new ones or the scenario's) through the whole read path:
// etcd decoding, the watch syncer's list and watch handling, a consumer's
// view (as felix's daemon holds it) and calc + rules. Nothing may panic,
// and the syncer must keep delivering: a marker written after the fuzzed
// records reaches the view on every kind.
func FuzzStoredRecords(f *testing.F) {
	// The syncer logs each bad record; thousands of runs need not.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	f.Add(uint16(0), []byte(`{"kind":"GlobalNetworkPolicy","spec":{"selector":123}}`), []byte(`{"spec":{"ingress":[{"act`), []byte(``))
	f.Add(uint16(0x0302), []byte(`{"metadata":{"name":"x"},"spec":{"selector":"all()","ingress":[{"action":"Deny"}]}}`), []byte(`null`), []byte(`{"spec":{"ipNetworks":["10.65.0.9/32"],"node":"node1","interfaceName":"caliX"}}`))
	f.Add(uint16(0xffff), []byte(`[]`), []byte(`{"spec":{"order":"x"}}`), []byte(`{"spec":{"nets":["nonsense"]}}`))
	f.Fuzz(fuzzStoredRecords)
}

func fuzzStoredRecords(t *testing.T, where uint16, a, b, c []byte) {
	store := newRawStore()
	for _, o := range ct.Scenario() {
		r := o.(v3.Resource)
		js, err := v3.EncodeJSON(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := store.put(datastore.KeyOf(r), js); err != nil {
			t.Fatal(err)
		}
	}
	// Each fuzzed record goes to a kind and, by one bit, either a new
	// name or a scenario object's key.
	keyFor := func(i int) datastore.Key {
		sel := int(where>>(5*i)) & 0x1f
		if sel&0x10 != 0 {
			return scenarioKeys[sel%len(scenarioKeys)]
		}
		kind := kinds[sel%len(kinds)]
		k := datastore.Key{Kind: kind, Name: fmt.Sprintf("fuzz-%d", i)}
		if info, _ := v3.LookupKind(kind); info.Namespaced {
			k.Namespace = "prod"
		}
		return k
	}
	// a is there from the start; b and c arrive by watch.
	if _, _, err := store.put(keyFor(0), a); err != nil {
		t.Fatal(err)
	}
	cb := &view{objs: map[datastore.Key]v3.Resource{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		datastore.NewWatchSyncer(store, kinds, cb, datastore.Backoff{Initial: time.Millisecond, Max: time.Millisecond}).Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	for i, v := range [][]byte{b, c} {
		k := keyFor(i + 1)
		store.watches[k.Kind] <- store.event(k, v)
	}
	for _, kind := range kinds {
		info, _ := v3.LookupKind(kind)
		m := info.New()
		m.SetName("zz-marker")
		if info.Namespaced {
			m.SetNamespace("prod")
		}
		store.watches[kind] <- datastore.Event{Type: datastore.EventAdded, Object: m}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		cb.mu.Lock()
		ok := cb.inSync && cb.markers == len(kinds)
		n := cb.markers
		cb.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("syncer stalled: %d of %d markers delivered", n, len(kinds))
		}
		time.Sleep(time.Millisecond)
	}
	// What felix computes from the view (as the daemon does).
	cb.mu.Lock()
	e := calc.NewEngine(ct.Node)
	for _, o := range cb.objs {
		e.Upsert(o)
	}
	cb.mu.Unlock()
	rules.NewRenderer(rules.DefaultConfig(), 4).RenderChanges(e.Flush())
}
