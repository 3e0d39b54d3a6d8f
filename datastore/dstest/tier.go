package dstest

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// testTierMustExist: as Calico's clientv3, a tiered policy is created only
// in a tier that exists; the refused policy is not stored.
func testTierMustExist(t *testing.T, c datastore.Client) {
	ctx := ctxT(t)
	gnp := func(tier string) *v3.GlobalNetworkPolicy {
		return &v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: tier + ".p"}, Spec: v3.GlobalNetworkPolicySpec{Tier: tier}}
	}
	missing := gnp("dst-missing")
	_, err := c.Create(ctx, missing)
	wantErr(t, err, datastore.ErrInvalid)
	if !strings.Contains(err.Error(), "resource does not exist: Tier(dst-missing)") {
		t.Fatalf("error %q does not name the missing tier", err)
	}
	if _, err := c.Get(ctx, datastore.KeyOf(missing)); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("the refused policy was stored: %v", err)
	}
	order := 50.0
	// A store may be shared by runs of the suite: what an earlier run
	// created may be there already.
	for _, r := range []v3.Resource{
		&v3.Tier{TypeMeta: metav1.TypeMeta{Kind: v3.KindTier, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "dst-sec"}, Spec: v3.TierSpec{Order: &order}},
		gnp("dst-sec"),
	} {
		if _, err := c.Create(ctx, r); err != nil && !errors.Is(err, datastore.ErrAlreadyExists) {
			t.Fatalf("creating %s: %v", datastore.KeyOf(r), err)
		}
	}
	// As Calico's clientv3: a tier that still holds a policy is not
	// deleted (on both backends).
	tierKey := datastore.Key{Kind: v3.KindTier, Name: "dst-sec"}
	_, err = c.Delete(ctx, tierKey, datastore.DeleteOptions{})
	if err == nil || !strings.Contains(err.Error(), "Cannot delete a non-empty tier") {
		t.Fatalf("deleting a tier holding a policy: %v, want refused", err)
	}
	if _, err := c.Get(ctx, tierKey); err != nil {
		t.Fatalf("the refused tier delete removed it: %v", err)
	}
}
