//go:build privileged

package e2e

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// BenchmarkPrivilegedFelixSync measures, on the synthetic cluster (1,000
// policies, 500 local and 5,000 remote endpoints), in fresh namespaces:
//
//   - floor: one plain iptables-restore of the final filter ruleset (plus,
//     reported apart, one ipset restore of its sets) into an empty namespace;
//   - fullsync: calc (the Engine's first load) + render + the driver's
//     first Apply (sets, table) into another empty namespace;
//   - change: calc + render + Apply after one policy's rules change, with
//     the calc Engine and caching Renderer the daemon uses: the median of 10
//     changes (change-s, change-apply-s), and the first one right after the
//     full sync apart (first-change-s: it also pays for the garbage the
//     full sync left).
//
// Each in both dataplane modes (sub-benchmarks iptables and nftables;
// the floor is iptables-restore's in both).
//
// Run: go test -tags privileged -run '^$' -bench FelixSync -benchtime 1x ./felix/e2e/
func BenchmarkPrivilegedFelixSync(b *testing.B) { benchEachMode(b, benchFelixSync) }

func benchFelixSync(b *testing.B, mode string) {
	ctx := context.Background()
	objs := ct.Synthetic(1000, 500, 5000)
	var floorIPT, floorSets, full, firstChange, change, changeApply, calcT, renderT time.Duration
	for range b.N {
		res := calc.Compute(ct.Input(ct.Node, objs))
		rs := rules.Render(rules.DefaultConfig(), res, 4)

		floorNS := netnstest.New(b)
		fr := dataplane.ExecRunner{NetnsPath: floorNS.Path()}
		t0 := time.Now()
		if _, err := fr.Run(ctx, "ipset", []string{"restore"}, []byte(rs.IPSetRestoreText())); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := fr.Run(ctx, "iptables-restore", []string{"--noflush"}, []byte(rs.RestoreText())); err != nil {
			b.Fatal(err)
		}
		floorSets += t1.Sub(t0)
		floorIPT += time.Since(t1)

		syncNS := netnstest.New(b)
		dp := newModeDataplane(b, mode, syncNS.Path(), dataplane.Config{
			Runner: dataplane.ExecRunner{NetnsPath: syncNS.Path()}, V4: dataplane.BackendDefaultV4,
			Logger: slog.New(slog.DiscardHandler),
		})
		renderer := rules.NewRenderer(rules.DefaultConfig(), 4)
		t2 := time.Now()
		engine := ct.Load(ct.Node, objs)
		res, delta := engine.Flush()
		tc := time.Now()
		dp.SetDesired(renderer.RenderChanges(res, delta))
		tr := time.Now()
		if _, err := dp.Apply(ctx); err != nil {
			b.Fatal(err)
		}
		full += time.Since(t2)
		calcT += tc.Sub(t2)
		renderT += tr.Sub(tc)

		// Then single policy changes, alternating between two versions of
		// one policy's rules: the first right after the full sync, and
		// the median of the rest (steady state).
		var changes, applies []time.Duration
		for i := 1; i <= 11; i++ {
			t3 := time.Now()
			engine.Upsert(ct.SyntheticPolicy(0, i%2))
			dp.SetDesired(renderer.RenderChanges(engine.Flush()))
			t4 := time.Now()
			r, err := dp.Apply(ctx)
			if err != nil {
				b.Fatal(err)
			}
			changes, applies = append(changes, time.Since(t3)), append(applies, time.Since(t4))
			if r.V4.ChainsWritten != 1 {
				b.Fatalf("one policy change rewrote %d chains, want 1", r.V4.ChainsWritten)
			}
		}
		firstChange += changes[0]
		change += medianOf(changes[1:])
		changeApply += medianOf(applies[1:])
	}
	n := float64(b.N)
	b.ReportMetric(floorIPT.Seconds()/n, "floor-iptables-s")
	b.ReportMetric(floorSets.Seconds()/n, "floor-ipset-s")
	b.ReportMetric(full.Seconds()/n, "fullsync-s")
	b.ReportMetric(calcT.Seconds()/n, "fullsync-calc-s")
	b.ReportMetric(renderT.Seconds()/n, "fullsync-render-s")
	b.ReportMetric(full.Seconds()/(floorIPT+floorSets).Seconds(), "fullsync/floor")
	b.ReportMetric(firstChange.Seconds()/n, "first-change-s")
	b.ReportMetric(change.Seconds()/n, "change-s")
	b.ReportMetric(changeApply.Seconds()/n, "change-apply-s")
	b.ReportMetric(rssMB(), "rss-MB")
}

func rssMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			kb, _ := strconv.Atoi(f[1])
			return float64(kb) / 1024
		}
	}
	return 0
}

func medianOf(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
