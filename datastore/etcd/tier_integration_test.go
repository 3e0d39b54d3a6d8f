//go:build integration

package etcd

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestDeleteNonEmptyTierRefused: as Calico's clientv3, a tier that still
// holds a policy is not deleted; once empty, it is.
func TestDeleteNonEmptyTierRefused(t *testing.T) {
	server := testservers.StartEtcd(t)
	c, err := New(Config{Endpoints: []string{server.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	order := 10.0
	tier := &v3.Tier{TypeMeta: metav1.TypeMeta{Kind: v3.KindTier}, ObjectMeta: metav1.ObjectMeta{Name: "security"}, Spec: v3.TierSpec{Order: &order}}
	np := &v3.NetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy}, ObjectMeta: metav1.ObjectMeta{Name: "security.p", Namespace: "ns"},
		Spec: v3.NetworkPolicySpec{Tier: "security"}}
	for _, r := range []v3.Resource{tier, np} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Delete(ctx, datastore.KeyOf(tier), datastore.DeleteOptions{})
	if err == nil || !strings.Contains(err.Error(), "Cannot delete a non-empty tier") {
		t.Fatalf("deleting a tier with a policy: %v, want refused", err)
	}
	if _, err := c.Get(ctx, datastore.KeyOf(tier)); err != nil {
		t.Fatalf("the tier is gone: %v", err)
	}
	if _, err := c.Delete(ctx, datastore.KeyOf(np), datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, datastore.KeyOf(tier), datastore.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the empty tier: %v", err)
	}
}
