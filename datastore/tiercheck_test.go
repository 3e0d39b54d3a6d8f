package datastore_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestCheckWriteTierExists: as Calico's clientv3, a tiered policy is
// created only in a tier that exists (the built-in tiers always do); an
// update is not checked.
func TestCheckWriteTierExists(t *testing.T) {
	ctx := context.Background()
	s := storeWith(t, &v3.Tier{TypeMeta: metav1.TypeMeta{Kind: v3.KindTier, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "security"}, Spec: v3.TierSpec{Order: ptr(100.0)}})
	np := func(tier string) v3.Resource {
		return &v3.NetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: tier + ".p", Namespace: "default"}, Spec: v3.NetworkPolicySpec{Tier: tier}}
	}
	gnp := func(tier string) v3.Resource {
		return &v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: tier + ".p"}, Spec: v3.GlobalNetworkPolicySpec{Tier: tier}}
	}
	sgnp := func(tier string) v3.Resource {
		return &v3.StagedGlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: tier + ".p"}, Spec: v3.StagedGlobalNetworkPolicySpec{Tier: tier}}
	}
	snp := func(tier string) v3.Resource {
		return &v3.StagedNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: tier + ".p", Namespace: "default"}, Spec: v3.StagedNetworkPolicySpec{Tier: tier}}
	}
	for _, tc := range []struct {
		name string
		obj  v3.Resource
		op   string
		want string
	}{
		{"NetworkPolicy in an existing tier", np("security"), "create", ""},
		{"NetworkPolicy in the default tier (built in)", np("default"), "create", ""},
		{"GlobalNetworkPolicy in kube-admin (built in)", gnp("kube-admin"), "create", ""},
		{"NetworkPolicy in a missing tier", np("nope"), "create", "spec.tier: resource does not exist: Tier(nope)"},
		{"GlobalNetworkPolicy in a missing tier", gnp("nope"), "create", "spec.tier: resource does not exist: Tier(nope)"},
		{"StagedGlobalNetworkPolicy in a missing tier", sgnp("nope"), "create", "spec.tier: resource does not exist: Tier(nope)"},
		{"StagedNetworkPolicy in a missing tier", snp("nope"), "create", "spec.tier: resource does not exist: Tier(nope)"},
		{"update is not checked, as in Calico", np("nope"), "update", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := datastore.CheckWrite(ctx, s, tc.op, tc.obj)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestCheckDeleteNonEmptyTier: as Calico's clientv3, a tier holding a
// policy is not deleted; an empty one, and other kinds, are not checked.
func TestCheckDeleteNonEmptyTier(t *testing.T) {
	ctx := context.Background()
	tier := func(name string) *v3.Tier {
		return &v3.Tier{TypeMeta: metav1.TypeMeta{Kind: v3.KindTier, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.TierSpec{Order: ptr(100.0)}}
	}
	s := storeWith(t, tier("security"), tier("empty"),
		&v3.StagedNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "security.p", Namespace: "default"}, Spec: v3.StagedNetworkPolicySpec{Tier: "security"}})
	err := datastore.CheckDelete(ctx, s, datastore.Key{Kind: v3.KindTier, Name: "security"})
	if err == nil || !strings.Contains(err.Error(), "Cannot delete a non-empty tier") {
		t.Fatalf("deleting a tier with a policy: %v, want refused", err)
	}
	if err := datastore.CheckDelete(ctx, s, datastore.Key{Kind: v3.KindTier, Name: "empty"}); err != nil {
		t.Fatalf("deleting an empty tier: %v", err)
	}
	if err := datastore.CheckDelete(ctx, s, datastore.Key{Kind: v3.KindIPPool, Name: "x"}); err != nil {
		t.Fatalf("another kind: %v", err)
	}
	// The built-in tiers are protected, empty or not (Calico's
	// names.TierIsProtected).
	for _, name := range []string{"default", "kube-admin", "kube-baseline"} {
		err := datastore.CheckDelete(ctx, s, datastore.Key{Kind: v3.KindTier, Name: name})
		if err == nil || !strings.Contains(err.Error(), "Cannot delete "+name+" tier") {
			t.Errorf("deleting the built-in tier %s: %v, want refused", name, err)
		}
	}
}
