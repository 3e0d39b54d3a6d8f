//go:build integration

package ipam

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// countingTransport counts the HTTP requests a client sends.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	if os.Getenv("TABBY_BENCH_TRACE") != "" {
		fmt.Fprintln(os.Stderr, "REQ", r.Method, r.URL.Path, r.URL.RawQuery)
	}
	return c.rt.RoundTrip(r)
}

// BenchmarkKDDClusterSize measures the IPAM part of a CNI ADD on the
// Kubernetes datastore (a fresh client, Warm with the block hint,
// AutoAssign into the node's affine block: what the calico plugin does in
// its one-call process) with
// 10 and with 1,000 nodes' worth of BlockAffinities and IPAMBlocks in the
// real kube-apiserver, same run: API requests per ADD (goal: the same
// count) and ADD p50/p99 (goal: within 10%). Also the time of one list of
// every affinity at that size, which each ADD paid before it read only its
// node's. Run with make bench-cni, or:
//
//	go test -tags integration -run '^$' -bench KDDClusterSize -benchtime 60x ./ipam/
func BenchmarkKDDClusterSize(b *testing.B) {
	k := testservers.StartKubeAPIServer(b)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS = -1
	testservers.ApplyCRDs(b, rc, "../manifests/crds")
	setup, err := kdd.New(kdd.Config{REST: rc, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	mustCreate(b, setup, pool("p", "10.0.0.0/8", 26))
	const node = "bench-node"
	// The node's block, passed as the hint the plugin keeps in its hint file.
	hint := netip.PrefixFrom(mustAssign(b, New(setup, Config{}), podArgs(node, "warm-up", 1, 0))[0], 26).Masked()
	seeded := 1
	for _, nodes := range []int{10, 1000} {
		seedNodes(b, setup, seeded, nodes)
		seeded = nodes
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			var lat, newLat, warmLat []time.Duration
			var reqs atomic.Int64
			for i := 0; i < b.N; i++ {
				crc := rest.CopyConfig(rc)
				crc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, n: &reqs} })
				start := time.Now()
				c, err := kdd.New(kdd.Config{REST: crc, OneConnection: true}) // as the plugin
				if err != nil {
					b.Fatal(err)
				}
				newLat = append(newLat, time.Since(start))
				a := New(c, Config{CacheTTL: 5 * time.Second, CachedReads: true}) // as the plugin
				if err := a.Warm(ctx, node, hint); err != nil {
					b.Fatal(err)
				}
				warmLat = append(warmLat, time.Since(start))
				args := podArgs(node, fmt.Sprintf("bench-%d-%d", nodes, i), 1, 0)
				mustAssign(b, a, args)
				lat = append(lat, time.Since(start))
				b.StopTimer()
				n := reqs.Load()
				if _, err := New(setup, Config{}).ReleaseByHandle(ctx, args.HandleID); err != nil {
					b.Fatal(err)
				}
				reqs.Store(n)
				b.StartTimer()
			}
			b.StopTimer()
			p := percentiles(lat)
			b.ReportMetric(float64(p[0].Microseconds())/1000, "add-p50-ms")
			b.ReportMetric(float64(p[1].Microseconds())/1000, "add-p99-ms")
			// Where the time goes: client set-up, then the first round trip
			// (TLS handshake + the reads), then the writes.
			b.ReportMetric(float64(percentiles(newLat)[0].Microseconds())/1000, "new-client-p50-ms")
			b.ReportMetric(float64(percentiles(warmLat)[0].Microseconds())/1000, "through-reads-p50-ms")
			b.ReportMetric(float64(reqs.Load())/float64(b.N), "requests/add")
			start := time.Now()
			l, err := setup.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "list-all-affinities-ms")
			b.ReportMetric(float64(len(l.Items)), "affinities")
		})
	}
}

// seedNodes writes, for nodes from..to-1, one block each with a confirmed
// affinity, as a cluster of that many nodes holds (8 writers at once).
func seedNodes(b *testing.B, c datastore.Client, from, to int) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	next := atomic.Int64{}
	next.Store(int64(from))
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < to; i = int(next.Add(1) - 1) {
				n := fmt.Sprintf("node-%04d", i)
				// 10.128.0.0/9 upwards: away from where bench-node claims.
				cidr := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i>>10), byte(i >> 2), byte(i % 4 * 64)}), 26)
				aff := &v3.BlockAffinity{
					TypeMeta:   metav1.TypeMeta{Kind: v3.KindBlockAffinity, APIVersion: v3.GroupVersion},
					ObjectMeta: metav1.ObjectMeta{Name: AffinityName(n, cidr)},
					Spec:       v3.BlockAffinitySpec{State: v3.BlockAffinityStateConfirmed, Node: n, Type: v3.BlockAffinityTypeHost, CIDR: cidr.String()},
				}
				for _, r := range []v3.Resource{NewBlock(cidr, n, metav1.Now()), aff} {
					if _, err := c.Create(ctx, r); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
