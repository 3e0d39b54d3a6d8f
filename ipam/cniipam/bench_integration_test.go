//go:build integration

package cniipam

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// BenchmarkInProcessAdd measures what the calico plugin pays for IPAM when
// it calls cniipam in-process from a fresh process: a new Allocator per
// ADD (nothing cached), against a real etcd, with 100 pods already on the
// node. It reports ADD and DEL p50 and datastore round trips per ADD.
func BenchmarkInProcessAdd(b *testing.B) {
	server := testservers.StartEtcd(b)
	c, err := etcd.New(etcd.Config{Endpoints: []string{server.Endpoint()}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(context.Background(), pool("p", "10.0.0.0/16")); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fresh := func(cl *ipamtest.Counter) *Plugin {
		return &Plugin{Alloc: ipam.New(cl, ipam.Config{CacheTTL: 5 * time.Second})}
	}
	cnt := &ipamtest.Counter{Client: c}
	for i := range 100 {
		if _, err := fresh(cnt).Add(ctx, req(fmt.Sprint("fill", i))); err != nil {
			b.Fatal(err)
		}
	}
	cnt.Reset()
	var adds, dels []time.Duration
	b.ResetTimer()
	for i := range b.N {
		r := req(fmt.Sprint("c", i))
		t0 := time.Now()
		if _, err := fresh(cnt).Add(ctx, r); err != nil {
			b.Fatal(err)
		}
		adds = append(adds, time.Since(t0))
		t0 = time.Now()
		if err := fresh(&ipamtest.Counter{Client: c}).Del(ctx, r); err != nil {
			b.Fatal(err)
		}
		dels = append(dels, time.Since(t0))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(adds), "add-p50-ms")
	b.ReportMetric(p50(dels), "del-p50-ms")
	b.ReportMetric(float64(cnt.Total())/float64(b.N), "roundtrips/add")
}
