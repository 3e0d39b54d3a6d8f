package calc_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// The scale benchmarks use issue 15's cluster: 1,000 policies, 110 local
// endpoints and N remote ones (TABBY_BENCH_SIZES, default 5000,150000).
// They take minutes, so they run only with TABBY_BENCH_SCALE=1 (make
// bench-scale-calc).
const scalePolicies, scaleLocals = 1000, 110

func benchSizes(b *testing.B, def string) []int {
	if os.Getenv("TABBY_BENCH_SCALE") == "" {
		b.Skip("scale benchmark: set TABBY_BENCH_SCALE=1 (make bench-scale)")
	}
	s := os.Getenv("TABBY_BENCH_SIZES")
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("TABBY_BENCH_SIZES: %v", err)
		}
		out = append(out, n)
	}
	return out
}

// extraRemote is one more remote endpoint like the synthetic ones: it
// joins selector and named-port sets.
func extraRemote() *v3.WorkloadEndpoint {
	w := ct.WEP("ns1", "extra", "node9", "caliextra", "10.250.0.1", map[string]string{"app": "a1"})
	w.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080}}
	return w
}

func loadEngine(objs []any) *calc.Engine {
	e := calc.NewEngine(ct.Node)
	// In felix's order: everything else before the workload endpoints
	// (felix/daemon feeds policies first).
	for _, o := range objs {
		if _, ok := o.(*v3.WorkloadEndpoint); !ok {
			e.Upsert(o)
		}
	}
	for _, o := range objs {
		if _, ok := o.(*v3.WorkloadEndpoint); ok {
			e.Upsert(o)
		}
	}
	e.Flush()
	return e
}

// BenchmarkScaleEngineEndpointChange is one remote endpoint appearing or
// going through the Engine (update + Flush: the Result and the Delta).
func BenchmarkScaleEngineEndpointChange(b *testing.B) {
	for _, n := range benchSizes(b, "5000,150000") {
		b.Run(fmt.Sprintf("remote=%d", n), func(b *testing.B) {
			e := loadEngine(ct.Synthetic(scalePolicies, scaleLocals, n))
			runtime.GC() // collect the load's garbage before, not during, the changes
			extra := extraRemote()
			i := 0
			var members int
			for b.Loop() {
				i++
				if i%2 == 1 {
					e.Upsert(extra)
				} else {
					e.Delete(extra)
				}
				_, d := e.Flush()
				members += len(d.IPSets)
			}
			b.ReportMetric(float64(members)/float64(i), "setsChanged/op")
		})
	}
}

// BenchmarkScaleEnginePolicyChange is one policy's rules changing through
// the Engine.
func BenchmarkScaleEnginePolicyChange(b *testing.B) {
	for _, n := range benchSizes(b, "5000,150000") {
		b.Run(fmt.Sprintf("remote=%d", n), func(b *testing.B) {
			e := loadEngine(ct.Synthetic(scalePolicies, scaleLocals, n))
			runtime.GC() // collect the load's garbage before, not during, the changes
			i := 0
			for b.Loop() {
				i++
				e.Upsert(ct.SyntheticPolicy(0, i%2))
				e.Flush()
			}
		})
	}
}

// BenchmarkScaleEngineLoad is the Engine's first load of the whole
// cluster and its first Flush; it reports the heap held afterwards.
func BenchmarkScaleEngineLoad(b *testing.B) {
	for _, n := range benchSizes(b, "5000,150000") {
		b.Run(fmt.Sprintf("remote=%d", n), func(b *testing.B) {
			objs := ct.Synthetic(scalePolicies, scaleLocals, n)
			var before, after runtime.MemStats
			var e *calc.Engine
			for b.Loop() {
				e = nil
				runtime.GC()
				runtime.ReadMemStats(&before)
				e = loadEngine(objs)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc))/(1<<20), "engineHeapMiB")
			runtime.KeepAlive(e)
		})
	}
}
