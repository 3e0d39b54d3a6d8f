package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

// BenchmarkScaleRecomputeRemoteEndpoint: one remote endpoint added or
// removed through OnUpdates -> Recompute -> Dataplane.Apply (fake kernel:
// the Go side only) on the synthetic cluster with 1,000 policies, 110
// local endpoints and TABBY_BENCH_SCALE_REMOTE remote ones (default
// 5,000). Also reports the CPU time of the first computation and apply
// (the snapshot) and the heap (TABBY_BENCH_HEAP_PROFILE writes a heap
// profile).
//
// Run: go test -run '^$' -bench ScaleRecompute -benchtime 40x ./felix/daemon/
func BenchmarkScaleRecomputeRemoteEndpoint(b *testing.B) {
	nRemote := 5000
	if n, err := strconv.Atoi(os.Getenv("TABBY_BENCH_SCALE_REMOTE")); err == nil {
		nRemote = n
	}
	log := slog.New(slog.DiscardHandler)
	dp := dataplane.New(dataplane.Config{Runner: fake.NewKernel(), V4: dataplane.BackendDefaultV4, Logger: log})
	d := New(Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log})
	var ups []datastore.Update
	for _, o := range ct.Synthetic(1000, 110, nRemote) {
		r := o.(v3.Resource)
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
	}
	d.OnUpdates(ups)
	ups = nil
	d.OnStatusUpdated(datastore.StatusInSync)
	load0 := cpuTime()
	d.Recompute()
	ctx := context.Background()
	if _, err := dp.Apply(ctx); err != nil {
		b.Fatal(err)
	}
	loadCPU := cpuTime() - load0
	cpu0 := cpuTime()
	i := 0
	for b.Loop() {
		w := ct.WEP("ns10", fmt.Sprintf("extra%d", i/2), "node2", "caliextra", fmt.Sprintf("10.250.%d.%d", (i/2)/250, (i/2)%250+1),
			map[string]string{"app": "a10"})
		typ := datastore.EventAdded
		if i%2 == 1 {
			typ = datastore.EventDeleted
		}
		d.OnUpdates([]datastore.Update{{Type: typ, Key: datastore.KeyOf(w), Object: w}})
		d.Recompute()
		res, err := dp.Apply(ctx)
		if err != nil || res.SetsWritten == 0 || res.SetsPatched != res.SetsWritten {
			b.Fatalf("change %d: %v %v: want only patched sets", i, res, err)
		}
		i++
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(i), "cpu-ms/op")
	b.ReportMetric(loadCPU.Seconds(), "load-cpu-s")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc>>20), "heap-MiB")
	if path := os.Getenv("TABBY_BENCH_HEAP_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
	}
	runtime.KeepAlive(d)
}

// cpuTime is the process's user+system CPU time so far (all threads:
// includes the garbage collector's work).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
