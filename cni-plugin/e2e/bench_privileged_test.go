//go:build privileged

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// BenchmarkCNI times ADD and DEL of pods one after another through libcni,
// for Tabby (calico + calico-ipam on etcd) and, in the same run, for the
// reference ptp + host-local plugins. The two sides alternate pod by pod,
// so a change in the machine's load falls on both alike. Run it with a
// fixed count so each side wires the same number of pods:
//
//	make bench-cni   (go test -tags privileged -bench CNI -benchtime 60x ./cni-plugin/e2e/)
//
// It reports min, p50 and p95 of ADD and DEL in milliseconds, for Tabby
// (tabby-*) and the reference (ref-*).
func BenchmarkCNI(b *testing.B) {
	tabby := newBenchCluster(b, nil)
	ref := newBenchCluster(b, map[string]any{
		"type": "ptp", "mtu": 1440,
		"ipam": map[string]any{"type": "host-local", "subnet": "10.252.0.0/16", "dataDir": b.TempDir()},
	})
	var t, r benchTimes
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchPod(b, tabby, i, &t)
		benchPod(b, ref, i, &r)
	}
	b.StopTimer()
	report(b, "tabby-add", t.adds)
	report(b, "tabby-del", t.dels)
	report(b, "ref-add", r.adds)
	report(b, "ref-del", r.dels)
	report(b, "tabby-add-cpu", t.addCPU)
	report(b, "ref-add-cpu", r.addCPU)
}

// newBenchCluster builds a cluster; plugin replaces calico when set.
func newBenchCluster(b *testing.B, plugin map[string]any) *cluster {
	c := newCluster(b, clusterOpts{pools: []string{"10.251.0.0/16"}})
	if plugin != nil {
		conflist, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "ptp-net", "plugins": []any{plugin}})
		path := filepath.Join(c.confs, "20-ptp.conflist")
		if err := os.WriteFile(path, conflist, 0o644); err != nil {
			b.Fatal(err)
		}
		list, err := libcni.ConfListFromFile(path)
		if err != nil {
			b.Fatal(err)
		}
		c.list = list
	}
	return c
}

type benchTimes struct{ adds, dels, addCPU []time.Duration }

// childCPU is the CPU time (user + system) used so far by waited-for
// child processes: the plugins libcni ran.
func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPod adds and deletes one pod, recording how long each took.
func benchPod(b *testing.B, c *cluster, i int, t *benchTimes) {
	b.StopTimer()
	p := c.newPod(fmt.Sprintf("bench-%d", i))
	b.StartTimer()
	start, cpu := time.Now(), childCPU()
	err := c.inNode(func() error {
		_, err := c.cni.AddNetworkList(context.Background(), c.list, p.rt)
		return err
	})
	t.adds = append(t.adds, time.Since(start))
	t.addCPU = append(t.addCPU, childCPU()-cpu)
	if err != nil {
		b.Fatalf("ADD %d: %v", i, err)
	}
	start = time.Now()
	if err := c.del(p); err != nil {
		b.Fatalf("DEL %d: %v", i, err)
	}
	t.dels = append(t.dels, time.Since(start))
}

func report(b *testing.B, op string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(ds[0]), op+"-min-ms")
	b.ReportMetric(ms(ds[len(ds)/2]), op+"-p50-ms")
	b.ReportMetric(ms(ds[len(ds)*95/100]), op+"-p95-ms")
}
