//go:build integration

package ipam

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// BenchmarkEtcd measures IPAM against one real etcd (started once):
// throughput on one node and on three nodes at once, round trips per
// allocation in the steady state, and allocation latency as a node fills.
// Run: go test -tags integration -run '^$' -bench Etcd -benchtime 2000x ./ipam/
func BenchmarkEtcd(b *testing.B) {
	server := testservers.StartEtcd(b)
	ctx := context.Background()
	wipe := func(b *testing.B) {
		raw, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint()}})
		if err != nil {
			b.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.Delete(ctx, "/", clientv3.WithPrefix()); err != nil {
			b.Fatal(err)
		}
		mustCreate(b, etcdClient(b, server.Endpoint()), pool("p", "10.0.0.0/12", 26))
	}
	// throughput allocates b.N addresses over nodes x 8 goroutines, each
	// node with its own client, and reports allocations per second.
	throughput := func(nodes int) func(b *testing.B) {
		return func(b *testing.B) {
			wipe(b)
			var allocs []*Allocator
			var counters []*ipamtest.Counter
			for range nodes {
				cnt := &ipamtest.Counter{Client: etcdClient(b, server.Endpoint())}
				counters = append(counters, cnt)
				allocs = append(allocs, New(cnt, Config{CacheTTL: 10 * time.Second}))
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for n := range nodes {
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							i := next.Add(1)
							if i > int64(b.N) {
								return
							}
							if _, err := allocs[n].AutoAssign(ctx, podArgs(fmt.Sprintf("node-%d", n), fmt.Sprint("p", i), 1, 0)); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "allocs/s")
			var cas int64
			for _, c := range counters {
				cas += c.Updates.Load()
			}
			b.ReportMetric(float64(cas)/float64(b.N), "blockCAS/alloc")
		}
	}
	b.Run("Throughput1Node", throughput(1))
	b.Run("Throughput3Nodes", throughput(3))

	b.Run("RoundTripsSteadyState", func(b *testing.B) {
		wipe(b)
		cnt := &ipamtest.Counter{Client: etcdClient(b, server.Endpoint())}
		a := New(cnt, Config{CacheTTL: time.Hour})
		mustAssign(b, a, podArgs("n1", "warm", 1, 0))
		cnt.Reset()
		var writes int64
		b.ResetTimer()
		for i := range b.N {
			mustAssign(b, a, podArgs("n1", fmt.Sprint("p", i), 1, 0))
		}
		b.StopTimer()
		writes = cnt.Creates.Load() + cnt.Updates.Load() + cnt.Deletes.Load()
		b.ReportMetric(float64(cnt.Total())/float64(b.N), "roundtrips/alloc")
		b.ReportMetric(float64(writes)/float64(b.N), "writes/alloc")
		b.ReportMetric(float64(cnt.Updates.Load())/float64(b.N), "blockCAS/alloc")
		// And what a fresh process (the CNI plugin: no caches) pays.
		cnt.Reset()
		for i := range 50 {
			mustAssign(b, New(cnt, Config{}), podArgs("n1", fmt.Sprint("cold", i), 1, 0))
		}
		b.ReportMetric(float64(cnt.Total())/50, "roundtrips/alloc-fresh-process")
	})

	// What the calico CNI plugin pays per ADD: a new connection, a fresh
	// Allocator (CacheTTL 5s as in cni-plugin/plugin/add.go), Warm, then
	// AutoAssign, with 20 pods already on the node. Round trips are
	// requests sent (a multi-read transaction counts as one); warm-p50-ms
	// is the Warm part (it includes connecting to etcd).
	b.Run("FreshProcessCNI", func(b *testing.B) {
		wipe(b)
		c := etcdClient(b, server.Endpoint())
		a := New(c, Config{CacheTTL: time.Minute})
		for i := range 20 {
			mustAssign(b, a, podArgs("n1", fmt.Sprint("fill", i), 1, 0))
		}
		var lat, ipamLat, warmLat []time.Duration
		var trips int64
		b.ResetTimer()
		for i := range b.N {
			t0 := time.Now()
			raw := etcdClient(b, server.Endpoint())
			cnt := &ipamtest.Counter{Client: raw}
			t1 := time.Now()
			fa := New(cnt, Config{CacheTTL: 5 * time.Second})
			if err := fa.Warm(ctx, "n1"); err != nil {
				b.Fatal(err)
			}
			warmLat = append(warmLat, time.Since(t1))
			ips := mustAssign(b, fa, podArgs("n1", fmt.Sprint("cni", i), 1, 0))
			lat = append(lat, time.Since(t0))
			ipamLat = append(ipamLat, time.Since(t1))
			trips += cnt.Total()
			b.StopTimer()
			raw.Close()
			if _, err := a.ReleaseIPs(ctx, ips...); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.StopTimer()
		ps, ips, wps := percentiles(lat), percentiles(ipamLat), percentiles(warmLat)
		b.ReportMetric(float64(wps[0].Microseconds())/1000, "warm-p50-ms")
		b.ReportMetric(float64(ps[0].Microseconds())/1000, "p50-ms-with-connect")
		b.ReportMetric(float64(ips[0].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(ips[1].Microseconds())/1000, "p95-ms")
		b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/alloc")
	})

	// Latency of one allocate (and the release that keeps the count) with
	// 1, 100 and 1000 pods already on the node.
	for _, pods := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("LatencyAt%dPods", pods), func(b *testing.B) {
			wipe(b)
			c := etcdClient(b, server.Endpoint())
			a := New(c, Config{CacheTTL: time.Minute})
			for i := range pods {
				mustAssign(b, a, podArgs("n1", fmt.Sprint("fill", i), 1, 0))
			}
			var lat []time.Duration
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				ips := mustAssign(b, a, podArgs("n1", fmt.Sprint("p", i), 1, 0))
				lat = append(lat, time.Since(t0))
				b.StopTimer()
				if _, err := a.ReleaseIPs(ctx, ips...); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportPercentiles(b, lat)
			// A fresh allocator per call, as a CNI process would be.
			lat = lat[:0]
			for i := range 30 {
				t0 := time.Now()
				ips := mustAssign(b, New(c, Config{}), podArgs("n1", fmt.Sprint("cold", i), 1, 0))
				lat = append(lat, time.Since(t0))
				a.ReleaseIPs(ctx, ips...)
			}
			ps := percentiles(lat)
			b.ReportMetric(float64(ps[0].Microseconds())/1000, "fresh-p50-ms")
		})
	}
}

func percentiles(lat []time.Duration) [2]time.Duration {
	s := append([]time.Duration(nil), lat...)
	for i := range s { // insertion sort: small n
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s) == 0 {
		return [2]time.Duration{}
	}
	return [2]time.Duration{s[len(s)/2], s[len(s)*95/100]}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	ps := percentiles(lat)
	b.ReportMetric(float64(ps[0].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ps[1].Microseconds())/1000, "p95-ms")
}
