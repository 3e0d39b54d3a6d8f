//go:build privileged

package dataplane_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// BenchmarkPrivilegedFirstApply is felix's first apply at scale (what
// start -> ready waits for after the calculation): the synthetic cluster
// with 1,000 policies, 110 local endpoints and TABBY_FIRSTAPPLY_REMOTE
// remote ones (default 150,000), rendered once, then programmed into a
// fresh namespace per iteration, in iptables mode (ipsets filled through
// netlink, iptables-restore) and in nftables mode (one transaction). It
// reports the wall time and the CPU time (this process and its
// children: the restores, ipset) of each apply, so that a slow kernel
// path shows as wall time not spent on a CPU.
//
// Run: go test -tags privileged -run '^$' -bench FirstApply -benchtime 3x ./felix/dataplane/
func BenchmarkPrivilegedFirstApply(b *testing.B) {
	remote := 150000
	if s := os.Getenv("TABBY_FIRSTAPPLY_REMOTE"); s != "" {
		remote, _ = strconv.Atoi(s)
	}
	engine := ct.Load(ct.Node, ct.Synthetic(1000, 110, remote))
	res, delta := engine.Flush()
	rs := rules.NewRenderer(rules.DefaultConfig(), 4).RenderChanges(res, delta)
	for _, mode := range []string{"iptables", "nftables"} {
		b.Run(mode, func(b *testing.B) {
			var wall, cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				n := netnstest.New(b)
				cfg := dataplane.Config{Runner: dataplane.ExecRunner{NetnsPath: n.Path()}, V4: dataplane.BackendDefaultV4,
					Logger: slog.New(slog.DiscardHandler)}
				if mode == "nftables" {
					cfg.NFTables = dataplane.NewNftDialer(n.Path())
				}
				dp := dataplane.New(cfg)
				dp.SetDesired(rs)
				b.StartTimer()
				cpu0, t0 := cpuSoFar(), time.Now()
				if _, err := dp.Apply(context.Background()); err != nil {
					b.Fatal(err)
				}
				wall += time.Since(t0)
				cpu += cpuSoFar() - cpu0
			}
			b.ReportMetric(wall.Seconds()/float64(b.N), "wall-s/apply")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/apply")
		})
	}
}
