//go:build integration

package startup

import (
	"context"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestIntegrationInitDatastore: four nodes initialising one empty etcd at
// once agree on one ClusterInformation and one default pool per IP
// version; a later start brings ClusterInformation up to date as Calico
// does (version replaced, cluster types merged, an explicit
// datastoreReady false left alone) and creates no pool of a version that
// already has one.
func TestIntegrationInitDatastore(t *testing.T) {
	e := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, err := Load(envOf("NODENAME", "n"+string(rune('0'+i)), "CLUSTER_TYPE", "k8s,bgp", "CALICO_IPV6POOL_CIDR", "fd00:7::/64"), "", true)
			if err == nil {
				err = InitDatastore(ctx, c, cfg, "v1", false, nil)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pools, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{})
	if err != nil || len(pools.Items) != 2 {
		t.Fatalf("pools %v, %v; want the two defaults", pools, err)
	}
	for i := range 4 {
		if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: "node.n" + string(rune('0'+i))}); err != nil {
			t.Errorf("node FelixConfiguration of n%d: %v", i, err)
		}
	}
	r, _ := c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
	ci := r.(*v3.ClusterInformation)
	guid := ci.Spec.ClusterGUID
	notReady := false
	ci.Spec.DatastoreReady = &notReady
	if _, err := c.Update(ctx, ci); err != nil {
		t.Fatal(err)
	}
	// A pool of the operator's; the default IPv4 pool is deleted.
	if _, err := c.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: DefaultIPv4PoolName}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, &v3.IPPool{TypeMeta: typeMeta(v3.KindIPPool), ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: v3.IPPoolSpec{CIDR: "10.5.0.0/16"}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(envOf("NODENAME", "n9", "CLUSTER_TYPE", "k8s,typha"), "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := InitDatastore(ctx, c, cfg, "v2", true, nil); err != nil {
		t.Fatal(err)
	}
	r, _ = c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
	s := r.(*v3.ClusterInformation).Spec
	if s.ClusterGUID != guid || s.CalicoVersion != "v2" || s.ClusterType != "k8s,bgp,typha,kdd" || s.DatastoreReady == nil || *s.DatastoreReady {
		t.Errorf("ClusterInformation after a second start: %+v (guid was %s)", s, guid)
	}
	if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: DefaultIPv4PoolName}); err == nil {
		t.Error("a default IPv4 pool was created though an IPv4 pool exists")
	}
}
