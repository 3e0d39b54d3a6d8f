package v3

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTierDefaultTiers(t *testing.T) {
	type tier struct {
		Name   string
		Order  float64
		Action Action
	}
	var got []tier
	for _, tr := range DefaultTiers() {
		got = append(got, tier{tr.Name, *tr.Spec.Order, *tr.Spec.DefaultAction})
		if tr.APIVersion != GroupVersion || tr.Kind != KindTier {
			t.Errorf("tier %s has TypeMeta %v", tr.Name, tr.TypeMeta)
		}
		// As the datastore stores them: defaulting changes nothing and
		// they validate.
		again := tr.DeepCopy()
		again.Default()
		if d := cmp.Diff(tr, again); d != "" {
			t.Errorf("Default changed built-in tier %s:\n%s", tr.Name, d)
		}
		polCheckErrs(t, tr.Validate(), "")
		if !IsBuiltInTier(tr.Name) {
			t.Errorf("IsBuiltInTier(%q) = false", tr.Name)
		}
	}
	want := []tier{
		{"kube-admin", 1000, Pass},
		{"default", 1_000_000, Deny},
		{"kube-baseline", 10_000_000, Pass},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("DefaultTiers (-want +got):\n%s", d)
	}

	// Each call returns fresh objects.
	first := DefaultTiers()
	*first[0].Spec.Order = 5
	if o := *DefaultTiers()[0].Spec.Order; o != KubeAdminTierOrder {
		t.Errorf("DefaultTiers shares state between calls: order %v", o)
	}
	if IsBuiltInTier("security") {
		t.Error(`IsBuiltInTier("security") = true`)
	}
}

func TestTierDefault(t *testing.T) {
	tr := &Tier{ObjectMeta: polMeta("security", "")}
	tr.Default()
	if *tr.Spec.Order != DefaultTierOrder || *tr.Spec.DefaultAction != Deny {
		t.Errorf("defaulted tier spec = order %v action %v, want %v Deny", *tr.Spec.Order, *tr.Spec.DefaultAction, DefaultTierOrder)
	}
	order, pass := 7.5, Pass
	tr = &Tier{ObjectMeta: polMeta("security", ""), Spec: TierSpec{Order: &order, DefaultAction: &pass}}
	tr.Default()
	if *tr.Spec.Order != 7.5 || *tr.Spec.DefaultAction != Pass {
		t.Errorf("Default overwrote set fields: %v %v", *tr.Spec.Order, *tr.Spec.DefaultAction)
	}
}

func TestTierBuiltInProtection(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	a := func(v Action) *Action { return &v }
	tests := []struct {
		name   string
		order  *float64
		action *Action
		want   string
	}{
		{"default", nil, nil, ""}, // defaults to exactly the built-in values
		{"default", f(1), nil, "spec.order: the built-in default tier must have order 1000000"},
		{"default", nil, a(Pass), "spec.defaultAction: the built-in default tier must have default action Deny"},
		{"kube-admin", f(KubeAdminTierOrder), a(Pass), ""},
		{"kube-admin", f(KubeAdminTierOrder), nil, "spec.defaultAction: the built-in kube-admin tier must have default action Pass"},
		{"kube-baseline", f(KubeBaselineTierOrder), a(Pass), ""},
		{"kube-baseline", f(DefaultTierOrder), a(Pass), "spec.order: the built-in kube-baseline tier must have order 10000000"},
		{"security", f(-5), a(Pass), ""},
		{"security", nil, a(Log), `spec.defaultAction: "Log" is not a tier default action`},
		{"a-very-long-tier-name-that-goes-past-the-sixty-three-character-limit", nil, nil, "is not a valid tier name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tier{ObjectMeta: polMeta(tc.name, ""), Spec: TierSpec{Order: tc.order, DefaultAction: tc.action}}
			tr.Default()
			polCheckErrs(t, tr.Validate(), tc.want)
		})
	}
}
