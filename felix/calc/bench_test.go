package calc_test

import (
	"runtime"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// The Engine's benchmarks over issue 15's bench-felix cluster: 1,000
// policies, 500 local and 5,000 remote endpoints.

// BenchmarkEngineLoad is a first load of the whole cluster into an Engine
// and its first Flush (felix's start-up).
func BenchmarkEngineLoad(b *testing.B) {
	objs := ct.Synthetic(1000, 500, 5000)
	var res *calc.Result
	for b.Loop() {
		res, _ = loadEngine(objs).Flush()
	}
	if len(res.Problems) > 0 {
		b.Fatalf("problems: %v", res.Problems[:1])
	}
	b.ReportMetric(float64(len(res.Policies)), "activePolicies")
	b.ReportMetric(float64(len(res.IPSets)), "ipsets")
}

// BenchmarkEnginePolicyChange is one policy's rules changing (Upsert +
// Flush).
func BenchmarkEnginePolicyChange(b *testing.B) {
	e := loadEngine(ct.Synthetic(1000, 500, 5000))
	runtime.GC() // collect the load's garbage before, not during, the changes
	variant := 0
	for b.Loop() {
		variant++
		e.Upsert(ct.SyntheticPolicy(0, variant%2))
		e.Flush()
	}
}

// BenchmarkEngineEndpointChange is a remote endpoint appearing or going
// (only ipset members change).
func BenchmarkEngineEndpointChange(b *testing.B) {
	e := loadEngine(ct.Synthetic(1000, 500, 5000))
	runtime.GC() // collect the load's garbage before, not during, the changes
	extra := extraRemote()
	i := 0
	for b.Loop() {
		i++
		if i%2 == 1 {
			e.Upsert(extra)
		} else {
			e.Delete(extra)
		}
		e.Flush()
	}
}
