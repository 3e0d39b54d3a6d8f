package syncclient_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncclient"
	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/syncserver"
)

// state is what a recorder's updates add up to: name -> resource version.
func (r *recorder) state() map[string]string {
	out := map[string]string{}
	for _, u := range r.ups {
		if u.Type == datastore.EventDeleted {
			delete(out, u.Key.Name)
		} else {
			out[u.Key.Name] = u.Object.GetResourceVersion()
		}
	}
	return out
}

// TestCompressedAndPlainClientsAgree: clients that take Calico's decoder
// restart get the snapshot as one shared snappy stream and the deltas
// compressed; an older client (no decoder restart) gets the plain stream;
// all end with the same data. A client connecting after the chain moved,
// while the shared snapshot is still fresh, gets that older snapshot and
// catches up from its crumb.
func TestCompressedAndPlainClientsAgree(t *testing.T) {
	cache := snapcache.New("felix", time.Now, nil, nil)
	for i := range 2500 {
		add(cache, policy(fmt.Sprintf("p%04d", i), fmt.Sprint(i+1), float64(i)))
	}
	cache.OnStatusUpdated(datastore.StatusInSync)
	reg := prometheus.NewRegistry()
	addr := startTyphaWith(t, cache, syncserver.Config{Registerer: reg, SnapshotValidity: time.Hour}).addr

	follow := func(name string, plain bool) *recorder {
		rec := newRecorder()
		cl := syncclient.New(syncclient.Config{SyncerType: syncproto.SyncerTypeFelix, Hostname: name, DisableCompression: plain,
			Addrs: func(context.Context) ([]string, error) { return []string{addr}, nil }}, rec)
		cctx, ccancel := context.WithCancel(context.Background())
		cdone := make(chan struct{})
		go func() { defer close(cdone); cl.Run(cctx) }()
		t.Cleanup(func() { ccancel(); <-cdone })
		return rec
	}
	inSyncWith := func(rec *recorder, n int) func() bool {
		return func() bool { return rec.inSync && len(rec.state()) == n }
	}
	zipped, plain := follow("zipped", false), follow("plain", true)
	zipped.waitFor(t, "the compressed client in sync", inSyncWith(zipped, 2500))
	plain.waitFor(t, "the plain client in sync", inSyncWith(plain, 2500))

	// The chain moves; a new client gets the snapshot made before.
	add(cache, policy("p0000", "9000", 0), policy("q", "9001", 1))
	late := follow("late", false)
	for _, r := range []*recorder{zipped, plain, late} {
		r.waitFor(t, "2501 policies", func() bool {
			s := r.state()
			return r.inSync && len(s) == 2501 && s["p0000"] == "9000"
		})
	}
	if got := metricValue(t, reg, "typha_snapshots_generated"); got != 1 {
		t.Errorf("binary snapshots generated: %v, want 1 (shared by both compressed clients)", got)
	}
	if got := metricValue(t, reg, "typha_snapshots_reused"); got != 1 {
		t.Errorf("binary snapshots reused: %v, want 1", got)
	}
	raw, zbytes := metricValue(t, reg, "typha_snapshot_raw_bytes"), metricValue(t, reg, "typha_snapshot_compressed_bytes")
	if zbytes <= 0 || zbytes >= raw/2 {
		t.Errorf("snapshot %v bytes compressed from %v: want under half", zbytes, raw)
	}
	t.Logf("snapshot of 2500 policies: %v bytes, %v compressed", raw, zbytes)
	plain.mu.Lock()
	want := plain.state()
	plain.mu.Unlock()
	for _, r := range []*recorder{zipped, late} {
		r.mu.Lock()
		got := r.state()
		r.mu.Unlock()
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("compressed client has %s at %q, the plain one at %q", k, got[k], v)
			}
		}
	}
}

// metricValue is the felix syncer's value of the counter or gauge name.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "syncer" && l.GetValue() == "felix" {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{syncer=felix}", name)
	return 0
}
