package calc_test

import (
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

// BenchmarkCompute is the full calculation over 1,000 policies, 500 local
// and 5,000 remote endpoints.
func BenchmarkCompute(b *testing.B) {
	in := ct.Input(ct.Node, ct.Synthetic(1000, 500, 5000))
	var res *calc.Result
	for b.Loop() {
		res = calc.Compute(in)
	}
	if len(res.Problems) > 0 {
		b.Fatalf("problems: %v", res.Problems[:1])
	}
	b.ReportMetric(float64(len(res.Policies)), "activePolicies")
	b.ReportMetric(float64(len(res.IPSets)), "ipsets")
}

// BenchmarkComputeOneChange is the recomputation after one policy changed,
// with a Memo carrying the unchanged objects' work.
func BenchmarkComputeOneChange(b *testing.B) {
	objs := ct.Synthetic(1000, 500, 5000)
	memo := calc.NewMemo()
	calc.ComputeWith(ct.Input(ct.Node, objs), memo)
	idx := -1
	for i, o := range objs {
		if p, ok := o.(interface{ GetName() string }); ok && p.GetName() == "pol0" {
			idx = i
		}
	}
	variant := 0
	for b.Loop() {
		variant++
		objs[idx] = ct.SyntheticPolicy(0, variant%2)
		calc.ComputeWith(ct.Input(ct.Node, objs), memo)
	}
}

// BenchmarkComputeEndpointChange is the recomputation after a remote
// endpoint appeared or went (only ipset members change).
func BenchmarkComputeEndpointChange(b *testing.B) {
	objs := ct.Synthetic(1000, 500, 5000)
	more := append(objs[:len(objs):len(objs)], ct.WEP("ns1", "extra", "node9", "caliextra", "10.99.0.1", map[string]string{"app": "a1"}))
	memo := calc.NewMemo()
	calc.ComputeWith(ct.Input(ct.Node, objs), memo)
	i := 0
	for b.Loop() {
		i++
		if i%2 == 0 {
			calc.ComputeWith(ct.Input(ct.Node, objs), memo)
		} else {
			calc.ComputeWith(ct.Input(ct.Node, more), memo)
		}
	}
}
