package rules_test

import (
	"runtime"
	"testing"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// BenchmarkRender renders (and hashes) the v4 filter table of the
// synthetic 1,000-policy / 500-local / 5,000-remote cluster from scratch
// (the Engine's first Result).
func BenchmarkRender(b *testing.B) {
	res, _ := ct.Load(ct.Node, ct.Synthetic(1000, 500, 5000)).Flush()
	var rs *rules.Ruleset
	n := 0
	for b.Loop() {
		rs = rules.Render(rules.DefaultConfig(), res, 4)
		n = len(rs.RestoreText())
	}
	rulesCount := 0
	for _, c := range rs.Chains {
		rulesCount += len(c.Rules)
	}
	b.ReportMetric(float64(len(rs.Chains)), "chains")
	b.ReportMetric(float64(rulesCount), "rules")
	b.ReportMetric(float64(len(rs.IPSets)), "ipsets")
	b.ReportMetric(float64(n), "restoreBytes")
}

// BenchmarkRenderChangesPolicyChange is the daemon's path after one
// policy's rules changed: Engine Upsert + Flush, then RenderChanges with
// the Delta, at 1,000 policies / 500 local / 5,000 remote endpoints.
func BenchmarkRenderChangesPolicyChange(b *testing.B) {
	e := ct.Load(ct.Node, ct.Synthetic(1000, 500, 5000))
	r := rules.NewRenderer(rules.DefaultConfig(), 4)
	r.RenderChanges(e.Flush())
	runtime.GC() // collect the load's garbage before, not during, the changes
	variant := 0
	for b.Loop() {
		variant++
		e.Upsert(ct.SyntheticPolicy(0, variant%2))
		r.RenderChanges(e.Flush())
	}
}

// BenchmarkRenderChangesEndpointChange is the daemon's path after a
// remote endpoint came or went (set members only).
func BenchmarkRenderChangesEndpointChange(b *testing.B) {
	e := ct.Load(ct.Node, ct.Synthetic(1000, 500, 5000))
	r := rules.NewRenderer(rules.DefaultConfig(), 4)
	r.RenderChanges(e.Flush())
	runtime.GC() // collect the load's garbage before, not during, the changes
	extra := ct.WEP("ns1", "extra", "node9", "caliextra", "10.250.0.1", map[string]string{"app": "a1"})
	i := 0
	for b.Loop() {
		i++
		if i%2 == 1 {
			e.Upsert(extra)
		} else {
			e.Delete(extra)
		}
		r.RenderChanges(e.Flush())
	}
}
