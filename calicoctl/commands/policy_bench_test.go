package commands

import (
	"syscall"
	"testing"
	"time"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// BenchmarkPolicyTrace is a trace over issue 26's scale: 1,000 policies
// and 150,000 workload endpoints (calctest.Synthetic), from the loaded
// snapshot to the report (the datastore listing is not counted; make
// bench-trace).
func BenchmarkPolicyTrace(b *testing.B) {
	const policies, locals, endpoints = 1000, 110, 150000
	s := &policySnapshot{endpointToHost: "Drop"}
	for _, o := range ct.Synthetic(policies, locals, endpoints-locals) {
		s.objs = append(s.objs, o)
	}
	pkt, err := parsePort("tcp/8080", 0)
	if err != nil {
		b.Fatal(err)
	}
	// Both ends on different nodes, each selected by about 10 policies.
	from, to := "ns2/pod102", "ns7/pod5007"
	rep, err := traceFlow(s, from, to, pkt)
	if err != nil {
		b.Fatal(err)
	}
	if len(rep.Hops) != 2 || len(rep.Hops[1].Tiers) == 0 || len(rep.Hops[0].Tiers) == 0 {
		b.Fatalf("trace did not reach both ends' policies: %+v", rep)
	}
	// CPU time is reported beside wall time: on a loaded machine it is
	// the steadier of the two.
	cpu0 := cpuTime(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := traceFlow(s, from, to, pkt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/trace")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/trace")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
