package rules_test

import (
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// BenchmarkRender renders (and hashes) the v4 filter table of the
// synthetic 1,000-policy / 500-local / 5,000-remote cluster.
func BenchmarkRender(b *testing.B) {
	res := calc.Compute(ct.Input(ct.Node, ct.Synthetic(1000, 500, 5000)))
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
