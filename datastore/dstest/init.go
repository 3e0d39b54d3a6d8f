package dstest

import (
	"sync"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// testInitialize: initialisation is idempotent and race-safe, and leaves
// ClusterInformation and Calico's built-in tiers in place.
func testInitialize(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = datastore.EnsureInitialized(ctx, c, "test", "k8s,bgp")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	ci := mustR(t)(c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})).(*v3.ClusterInformation)
	if ci.Spec.DatastoreReady == nil || !*ci.Spec.DatastoreReady || ci.Spec.ClusterGUID == "" {
		t.Fatalf("ClusterInformation not initialised: %+v", ci.Spec)
	}
	guid := ci.Spec.ClusterGUID
	if err := datastore.EnsureInitialized(ctx, c, "test", "k8s,bgp"); err != nil {
		t.Fatal(err)
	}
	again := mustR(t)(c.Get(ctx, datastore.KeyOf(ci))).(*v3.ClusterInformation)
	if again.Spec.ClusterGUID != guid {
		t.Fatal("second initialisation replaced the cluster GUID")
	}
	want := map[string]float64{
		v3.DefaultTierName:      v3.DefaultTierOrder,
		v3.KubeAdminTierName:    v3.KubeAdminTierOrder,
		v3.KubeBaselineTierName: v3.KubeBaselineTierOrder,
	}
	tiers := mustL(t)(c.List(ctx, v3.KindTier, datastore.ListOptions{}))
	if len(tiers.Items) != len(want) {
		t.Fatalf("%d tiers, want %d", len(tiers.Items), len(want))
	}
	for _, it := range tiers.Items {
		tier := it.(*v3.Tier)
		order, ok := want[tier.Name]
		if !ok || tier.Spec.Order == nil || *tier.Spec.Order != order {
			t.Errorf("tier %s has order %v, want %v", tier.Name, tier.Spec.Order, order)
		}
	}
}
