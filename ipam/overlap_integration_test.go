//go:build integration

package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestIntegrationOverlappingRawPools: the two overlapping pools
// (10.50.0.0/20 with /24 blocks, 10.50.0.0/24 with /28 blocks) written
// straight into etcd, past the datastore's overlap check; two nodes, each
// with its own client and aimed at the block starting at 10.50.0.0,
// allocate concurrently from one pool each. No address is handed out
// twice, no two blocks overlap, and the store stays consistent.
func TestIntegrationOverlappingRawPools(t *testing.T) {
	server := testservers.StartEtcd(t)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	ctx := context.Background()
	big, small := overlapPools()
	for _, p := range []struct {
		name string
		cidr netip.Prefix
		bits int
	}{{"big", big, 24}, {"small", small, 28}} {
		js := fmt.Sprintf(`{"apiVersion":"projectcalico.org/v3","kind":"IPPool","metadata":{"name":%q,"uid":"%s-uid","creationTimestamp":"2026-01-01T00:00:00Z"},`+
			`"spec":{"cidr":%q,"blockSize":%d,"ipipMode":"Never","vxlanMode":"Never","nodeSelector":"all()","allowedUses":["Workload","Tunnel"]}}`,
			p.name, p.name, p.cidr, p.bits)
		if _, err := raw.Put(ctx, "/calico/resources/v3/projectcalico.org/ippools/"+p.name, js); err != nil {
			t.Fatal(err)
		}
	}
	setup := etcdClient(t, server.Endpoint())
	if l, err := setup.List(ctx, v3.KindIPPool, datastore.ListOptions{}); err != nil || len(l.Items) != 2 {
		t.Fatalf("raw pools not readable: %v %v", l, err)
	}
	// Through the client the second pool is refused, naming both.
	if _, err := setup.Create(ctx, pool("small-2", small.String(), 28)); !errors.Is(err, datastore.ErrInvalid) {
		t.Fatalf("overlapping pool created through the client: %v", err)
	}

	nodes := []struct{ node, pool string }{
		{nodeStartingAt(t, "big", big, 24, netip.MustParsePrefix("10.50.0.0/24")), "big"},
		{nodeStartingAt(t, "small", small, 28, netip.MustParsePrefix("10.50.0.0/28")), "small"},
	}
	var mu sync.Mutex
	seen := map[netip.Addr]string{}
	var wg sync.WaitGroup
	for _, n := range nodes {
		a := New(etcdClient(t, server.Endpoint()), Config{})
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 20 {
					args := podArgs(n.node, fmt.Sprintf("%s-%d-%d", n.pool, g, i), 1, 0)
					args.IPv4Pools = []string{n.pool}
					ips, err := a.AutoAssign(ctx, args)
					if err != nil {
						t.Errorf("%s: %v", args.HandleID, err)
						return
					}
					mu.Lock()
					if prev, dup := seen[ips[0]]; dup {
						t.Errorf("DUPLICATE %s: %s and %s", ips[0], prev, args.HandleID)
					}
					seen[ips[0]] = args.HandleID
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	snap := checkStore(t, setup)
	if len(snap.byIP) != 120 {
		t.Errorf("%d addresses allocated, want 120", len(snap.byIP))
	}
	var blocks []*v3.IPAMBlock
	for _, b := range snap.blocks {
		blocks = append(blocks, b)
	}
	if o := CheckOverlaps(blocks); len(o) > 0 {
		t.Errorf("overlapping blocks: %v", o)
	}
	t.Logf("%d blocks: %v", len(snap.blocks), func() []netip.Prefix {
		var cs []netip.Prefix
		for c := range snap.blocks {
			cs = append(cs, c)
		}
		return cs
	}())
}
