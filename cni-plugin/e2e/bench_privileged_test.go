//go:build privileged

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// BenchmarkCNI times ADD and DEL of pods one after another through libcni,
// for Tabby (calico + calico-ipam on etcd) and, in the same run, for the
// reference ptp + host-local plugins. Run it with a fixed count so each
// side wires the same number of pods:
//
//	make bench-cni   (go test -tags privileged -bench CNI -benchtime 60x ./cni-plugin/e2e/)
//
// It reports min, p50 and p95 of ADD and DEL in milliseconds.
func BenchmarkCNI(b *testing.B) {
	b.Run("tabby", func(b *testing.B) {
		c := newBenchCluster(b, nil)
		benchPods(b, c)
	})
	b.Run("ptp+host-local", func(b *testing.B) {
		dataDir := b.TempDir()
		c := newBenchCluster(b, map[string]any{
			"type": "ptp", "mtu": 1440,
			"ipam": map[string]any{"type": "host-local", "subnet": "10.252.0.0/16", "dataDir": dataDir},
		})
		benchPods(b, c)
	})
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

func benchPods(b *testing.B, c *cluster) {
	adds := make([]time.Duration, 0, b.N)
	dels := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p := c.newPod(fmt.Sprintf("bench-%d", i))
		b.StartTimer()
		start := time.Now()
		err := c.inNode(func() error {
			_, err := c.cni.AddNetworkList(context.Background(), c.list, p.rt)
			return err
		})
		adds = append(adds, time.Since(start))
		if err != nil {
			b.Fatalf("ADD %d: %v", i, err)
		}
		start = time.Now()
		if err := c.del(p); err != nil {
			b.Fatalf("DEL %d: %v", i, err)
		}
		dels = append(dels, time.Since(start))
	}
	b.StopTimer()
	report(b, "add", adds)
	report(b, "del", dels)
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
