//go:build privileged

package e2e

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// BenchmarkPrivilegedDaemonPolicyChange measures what a user sees: the
// time from the daemon being told of one changed policy (a syncer update)
// to the kernel holding the new rules, through the daemon's coalescing,
// calc, render and the real iptables-restore, on the synthetic cluster
// (1,000 policies, 500 local and 5,000 remote endpoints). It reports the
// median of b.N changes.
//
// In both dataplane modes (sub-benchmarks iptables and nftables).
//
// Run: go test -tags privileged -run '^$' -bench DaemonPolicyChange -benchtime 20x ./felix/e2e/
func BenchmarkPrivilegedDaemonPolicyChange(b *testing.B) {
	benchEachMode(b, benchDaemonPolicyChange)
}

func benchDaemonPolicyChange(b *testing.B, mode string) {
	n := netnstest.New(b)
	dp := &signallingDataplane{
		dp: newModeDataplane(b, mode, n.Path(), dataplane.Config{
			Runner: dataplane.ExecRunner{NetnsPath: n.Path()}, V4: dataplane.BackendDefaultV4,
			Logger: slog.New(slog.DiscardHandler),
		}),
		kick: make(chan struct{}, 1), applied: make(chan applyResult, 16),
	}
	d := daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, nil) }()
	b.Cleanup(func() { cancel(); <-done })

	var ups []datastore.Update
	for _, o := range ct.Synthetic(1000, 500, 5000) {
		r := o.(v3.Resource)
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
	}
	d.OnUpdates(ups)
	d.OnStatusUpdated(datastore.StatusInSync)
	if r := <-dp.applied; r.err != nil {
		b.Fatalf("first sync: %v", r.err)
	}
	// Let the first sync settle (the updates and the in-sync status may
	// make two computations), then start from an empty channel.
	for quiet := false; !quiet; {
		select {
		case r := <-dp.applied:
			if r.err != nil {
				b.Fatal(r.err)
			}
		case <-time.After(500 * time.Millisecond):
			quiet = true
		}
	}
	var took []time.Duration
	i := 0
	for b.Loop() {
		i++
		var p v3.Resource = ct.SyntheticPolicy(0, i%2)
		start := time.Now()
		d.OnUpdates([]datastore.Update{{Type: datastore.EventModified, Key: datastore.KeyOf(p), Object: p}})
		r := <-dp.applied
		took = append(took, time.Since(start))
		if r.err != nil || r.res.V4.ChainsWritten != 1 {
			b.Fatalf("change %d: %v, %v: want one chain rewritten", i, r.res, r.err)
		}
	}
	b.ReportMetric(medianOf(took).Seconds(), "p50-event-to-kernel-s")
}

// signallingDataplane applies each desired state as dataplane.Dataplane's
// Run loop does (the latest one, one Apply at a time) and reports every
// Apply's result.
type signallingDataplane struct {
	dp      *dataplane.Dataplane
	mu      sync.Mutex
	pending []*rules.Ruleset
	kick    chan struct{}
	applied chan applyResult
}

type applyResult struct {
	res dataplane.Result
	err error
}

// Generation implements daemon.Dataplane (no endpoint status here).
func (s *signallingDataplane) Generation() uint64 { return s.dp.Generation() }

func (s *signallingDataplane) SetDesired(rs ...*rules.Ruleset) {
	s.mu.Lock()
	s.pending = rs
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *signallingDataplane) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.kick:
		}
		s.mu.Lock()
		rs := s.pending
		s.mu.Unlock()
		s.dp.SetDesired(rs...)
		res, err := s.dp.Apply(ctx)
		select {
		case s.applied <- applyResult{res, err}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
