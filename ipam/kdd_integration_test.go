//go:build integration

package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestIntegrationKDDStress is the stress test at a smaller scale against a
// real kube-apiserver (Kubernetes datastore, CRDs from manifests/crds):
// 3 nodes x 4 goroutines x 25 allocate/release cycles, then no duplicate,
// no leak, consistent blocks.
func TestIntegrationKDDStress(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../manifests/crds")
	newClient := func() datastore.Client {
		c, err := kdd.New(kdd.Config{REST: rc, QPS: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	setup := newClient()
	mustCreate(t, setup, pool("p", "10.0.0.0/20", 26), pool("p6", "fd00::/112", 122))
	ctx := context.Background()
	var mu sync.Mutex
	live := map[netip.Addr]string{}
	var wg sync.WaitGroup
	start := time.Now()
	const goroutines, cycles = 4, 25
	for n := range 3 {
		a := New(newClient(), Config{CacheTTL: time.Second})
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var held []string
				ipsOf := map[string][]netip.Addr{}
				release := func(h string) {
					mu.Lock()
					for _, ip := range ipsOf[h] {
						delete(live, ip)
					}
					mu.Unlock()
					if _, err := a.ReleaseByHandle(ctx, h); err != nil {
						t.Error(err)
					}
				}
				for i := range cycles {
					args := podArgs(fmt.Sprintf("node-%d", n), fmt.Sprintf("p%d-%d-%d", n, g, i), 1, i%5/4)
					ips, err := a.AutoAssign(ctx, args)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, ip := range ips {
						if h, dup := live[ip]; dup {
							t.Errorf("DUPLICATE %s: %s and %s", ip, h, args.HandleID)
						}
						live[ip] = args.HandleID
					}
					mu.Unlock()
					held = append(held, args.HandleID)
					ipsOf[args.HandleID] = ips
					if len(held) > 3 {
						release(held[0])
						held = held[1:]
					}
				}
				for _, h := range held {
					release(h)
				}
			}()
		}
	}
	wg.Wait()
	snap := checkStore(t, setup)
	if len(snap.byIP) != 0 || len(snap.handles) != 0 {
		t.Errorf("LEAKS: %d allocations, %d handles", len(snap.byIP), len(snap.handles))
	}
	t.Logf("kube-apiserver: 3 nodes x %d goroutines x %d cycles in %v, %d blocks", goroutines, cycles, time.Since(start).Round(time.Millisecond), len(snap.blocks))
}
