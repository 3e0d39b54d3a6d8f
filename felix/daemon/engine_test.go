package daemon_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/rules"
)

// captureDataplane keeps the last rulesets handed to it.
type captureDataplane struct {
	mu   sync.Mutex
	last []*rules.Ruleset
}

func (c *captureDataplane) SetDesired(rss ...*rules.Ruleset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = rss
}

func (c *captureDataplane) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// TestRecomputeFollowsChangesAsCompute feeds the daemon random changes
// (ct.Mutate: adds, deletes and replacements of every kind, as syncer
// updates, several per computation) and checks that what it renders
// from its incremental calculation is what a from-scratch Compute of its
// cache renders.
func TestRecomputeFollowsChangesAsCompute(t *testing.T) {
	dp := &captureDataplane{}
	d := daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp,
		Logger: slog.New(slog.DiscardHandler)})
	rng := rand.New(rand.NewPCG(3, 4))
	objs := ct.Churn()
	cache := map[datastore.Key]v3.Resource{}
	sync := func(next []any) {
		seen := map[datastore.Key]bool{}
		var ups []datastore.Update
		for _, o := range next {
			r := o.(v3.Resource)
			k := datastore.KeyOf(r)
			seen[k] = true
			if cache[k] != r {
				typ := datastore.EventModified
				if cache[k] == nil {
					typ = datastore.EventAdded
				}
				ups = append(ups, datastore.Update{Type: typ, Key: k, Object: r})
				cache[k] = r
			}
		}
		for k, r := range cache {
			if !seen[k] {
				ups = append(ups, datastore.Update{Type: datastore.EventDeleted, Key: k, Object: r})
				delete(cache, k)
			}
		}
		d.OnUpdates(ups)
	}
	sync(objs)
	d.OnStatusUpdated(datastore.StatusInSync)
	for step := range 60 {
		if step > 0 {
			for range 1 + rng.IntN(3) {
				objs = ct.Mutate(rng, objs, step)
			}
			sync(objs)
		}
		if !d.Recompute() {
			t.Fatal("Recompute did nothing after the snapshot")
		}
		var in []any
		for _, r := range cache {
			in = append(in, r)
		}
		want := rules.NewRenderer(rules.DefaultConfig(), 4).Render(calc.Compute(ct.Input(ct.Node, in)))
		dp.mu.Lock()
		got := dp.last[0]
		dp.mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d: rendered from the daemon's calculation differs from Compute's (-compute +daemon):\n%s", step, diff)
		}
	}
}
