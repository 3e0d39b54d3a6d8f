//go:build privileged

package dataplane_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// BenchmarkPrivilegedOneChange programs the synthetic cluster (1,000
// policies, 500 local and 5,000 remote endpoints) into a fresh namespace
// once, then times b.N single changes through the whole pipeline (the
// calc Engine, caching Renderer fed its Delta, Dataplane.Apply with the
// real binaries),
// reporting medians, which a loaded machine disturbs less than means:
//
//   - policy: one policy's rules change (one chain rewritten, one
//     iptables-restore);
//   - membership: a remote endpoint appears or goes (ipset members only,
//     written through netlink: no process, no iptables-restore);
//   - membership-restore: the same through one ipset restore process (a
//     Runner without IPSetMembers, as before the netlink path);
//   - policy-dualstack: "policy" with IPv6 on as well (two tables).
//
// The -nft variants are the same through the nftables dataplane; they
// also report the nftables transactions (netlink batches) per change:
// one, also for both families.
//
// Run: go test -tags privileged -run '^$' -bench OneChange -benchtime 30x ./felix/dataplane/
func BenchmarkPrivilegedOneChange(b *testing.B) {
	ctx := context.Background()
	base := ct.Synthetic(1000, 500, 5000)
	remote := ct.WEP("ns1", "extra", "node9", "caliextra", "10.99.0.1", map[string]string{"app": "a1"})
	policy := func(e *calc.Engine, i int) { e.Upsert(ct.SyntheticPolicy(0, i%2)) }
	membership := func(e *calc.Engine, i int) {
		if i%2 == 0 {
			e.Delete(remote)
		} else {
			e.Upsert(remote)
		}
	}
	for _, tc := range []struct {
		name        string
		dualStack   bool
		restoreOnly bool
		change      func(e *calc.Engine, i int)
		nft         bool // nftablesMode Enabled
	}{
		{"policy", false, false, policy, false},
		{"policy-nft", false, false, policy, true},
		{"membership", false, false, membership, false},
		{"membership-nft", false, false, membership, true},
		{"membership-restore", false, true, membership, false},
		// As felix runs with FELIX_IPV6SUPPORT=true: both families'
		// tables hold every endpoint and policy chain, so a policy
		// change is two restores (run concurrently); in nftables mode
		// one transaction.
		{"policy-dualstack", true, false, policy, false},
		{"policy-dualstack-nft", true, false, policy, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := netnstest.New(b)
			var runner dataplane.Runner = dataplane.ExecRunner{NetnsPath: n.Path()}
			if tc.restoreOnly {
				runner = restoreOnly{runner}
			}
			cfg := dataplane.Config{Runner: runner, V4: dataplane.BackendDefaultV4, Logger: slog.New(slog.DiscardHandler)}
			renderers := []*rules.Renderer{rules.NewRenderer(rules.DefaultConfig(), 4)}
			if tc.dualStack {
				cfg.V6 = dataplane.BackendDefaultV6
				renderers = append(renderers, rules.NewRenderer(rules.DefaultConfig(), 6))
			}
			var transactions int
			if tc.nft {
				cfg.NFTables = countingDialer(dataplane.NewNftDialer(n.Path()), &transactions)
			}
			dp := dataplane.New(cfg)
			render := func(res *calc.Result, delta *calc.Delta) []*rules.Ruleset {
				var out []*rules.Ruleset
				for _, r := range renderers {
					out = append(out, r.RenderChanges(res, delta))
				}
				return out
			}
			engine := ct.Load(ct.Node, base)
			tc.change(engine, 0)
			dp.SetDesired(render(engine.Flush())...)
			if _, err := dp.Apply(ctx); err != nil {
				b.Fatal(err)
			}
			var calcT, renderT, applyT, total []time.Duration
			i, transactions := 0, 0
			cpu0 := cpuSoFar()
			for b.Loop() {
				i++
				t0 := time.Now()
				tc.change(engine, i)
				res, delta := engine.Flush()
				t1 := time.Now()
				dp.SetDesired(render(res, delta)...)
				t2 := time.Now()
				if _, err := dp.Apply(ctx); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				calcT, renderT = append(calcT, t1.Sub(t0)), append(renderT, t2.Sub(t1))
				applyT, total = append(applyT, t3.Sub(t2)), append(total, t3.Sub(t0))
			}
			b.ReportMetric(median(total).Seconds(), "p50-change-s")
			b.ReportMetric(median(calcT).Seconds(), "p50-calc-s")
			b.ReportMetric(median(renderT).Seconds(), "p50-render-s")
			b.ReportMetric(median(applyT).Seconds(), "p50-apply-s")
			b.ReportMetric((cpuSoFar()-cpu0).Seconds()*1e3/float64(i), "cpu-ms/change")
			if tc.nft {
				b.ReportMetric(float64(transactions)/float64(i), "nft-transactions/change")
			}
		})
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// flushCounter counts the transactions committed through an NftConn.
type flushCounter struct {
	dataplane.NftConn
	n *int
}

func (c flushCounter) Flush() error {
	*c.n++
	return c.NftConn.Flush()
}

// countingDialer dials through d and counts every transaction in *n.
func countingDialer(d dataplane.NftDialer, n *int) dataplane.NftDialer {
	return func() (dataplane.NftConn, func(), error) {
		c, closeConn, err := d()
		if err != nil {
			return nil, nil, err
		}
		return flushCounter{c, n}, closeConn, nil
	}
}
