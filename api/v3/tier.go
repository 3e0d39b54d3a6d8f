package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindTier is the kind of a policy tier.
const KindTier = "Tier"

// The built-in tiers. The datastore creates them (idempotently, see
// DefaultTiers) and their order and default action cannot be changed.
const (
	// DefaultTierName is the tier of every policy that names no tier.
	DefaultTierName = "default"
	// KubeAdminTierName holds policies converted from Kubernetes
	// ClusterNetworkPolicy's Admin tier; it comes first.
	KubeAdminTierName = "kube-admin"
	// KubeBaselineTierName holds policies converted from Kubernetes
	// ClusterNetworkPolicy's Baseline tier; it comes last.
	KubeBaselineTierName = "kube-baseline"
)

// Orders of the built-in tiers. A tier with no order is given
// DefaultTierOrder, as in Calico.
const (
	KubeAdminTierOrder    = float64(1_000)
	DefaultTierOrder      = float64(1_000_000)
	KubeBaselineTierOrder = float64(10_000_000)
)

// Tier groups policies. Tiers apply in ascending order; within a tier the
// first policy (by its order) with a matching Allow or Deny decides, Pass
// moves on to the next tier, and a packet that no policy of the tier decides
// gets the tier's default action.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=tiers
type Tier struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TierSpec `json:"spec,omitempty"`
	// Status is written by the tier controller.
	Status TierStatus `json:"status,omitzero"`
}

// TierSpec is the content of a Tier.
type TierSpec struct {
	// Order sets when the tier applies: lower first. Tiers with equal order
	// apply in name order. [Default: 1000000]
	Order *float64 `json:"order,omitempty"`
	// DefaultAction applies to traffic of an endpoint selected by some
	// policy in the tier when no rule of those policies matched: Deny or
	// Pass. [Default: Deny]
	// +kubebuilder:validation:Enum=Pass;Deny
	// +kubebuilder:default=Deny
	DefaultAction *Action `json:"defaultAction,omitempty"`
}

// TierStatus reports the state of a tier.
type TierStatus struct {
	// Conditions are the latest observations of the tier; "Ready" with
	// status "True" means it works as expected.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TierList is a list of Tier.
// +kubebuilder:object:root=true
type TierList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tier `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindTier, Plural: "tiers",
		New:     func() Resource { return &Tier{TypeMeta: typeMeta(KindTier)} },
		NewList: func() runtimeObject { return &TierList{TypeMeta: typeMeta(KindTier + "List")} },
	})
}

// polBuiltInTiers maps each built-in tier to the order and default action it
// must have.
var polBuiltInTiers = map[string]struct {
	order  float64
	action Action
}{
	DefaultTierName:      {DefaultTierOrder, Deny},
	KubeAdminTierName:    {KubeAdminTierOrder, Pass},
	KubeBaselineTierName: {KubeBaselineTierOrder, Pass},
}

// DefaultTiers returns fresh copies of the built-in tiers (kube-admin,
// default, kube-baseline, in order) with Calico's orders and default
// actions, for the datastore to create when missing.
func DefaultTiers() []*Tier {
	names := []string{KubeAdminTierName, DefaultTierName, KubeBaselineTierName}
	out := make([]*Tier, 0, len(names))
	for _, n := range names {
		b := polBuiltInTiers[n]
		order, action := b.order, b.action
		out = append(out, &Tier{
			TypeMeta:   typeMeta(KindTier),
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec:       TierSpec{Order: &order, DefaultAction: &action},
		})
	}
	return out
}

// IsBuiltInTier reports whether name is one of the tiers Tabby creates
// itself and never deletes.
func IsBuiltInTier(name string) bool {
	_, ok := polBuiltInTiers[name]
	return ok
}

// Default implements Resource: a missing order becomes DefaultTierOrder and
// a missing default action Deny, as Calico defaults them.
func (t *Tier) Default() {
	if t.Spec.Order == nil {
		o := DefaultTierOrder
		t.Spec.Order = &o
	}
	if t.Spec.DefaultAction == nil {
		a := Deny
		t.Spec.DefaultAction = &a
	}
}

// Validate implements Resource.
func (t *Tier) Validate() ErrorList {
	errs := validateMeta(&t.ObjectMeta, false)
	if t.Name != "" {
		polCheckTierName("metadata.name", t.Name, &errs)
	}
	sp := Path("spec")
	if a := t.Spec.DefaultAction; a != nil && *a != Deny && *a != Pass {
		errs.Addf(sp.Child("defaultAction"), "%q is not a tier default action: use Deny or Pass", *a)
	}
	if b, ok := polBuiltInTiers[t.Name]; ok {
		if t.Spec.Order == nil || *t.Spec.Order != b.order {
			errs.Addf(sp.Child("order"), "the built-in %s tier must have order %.0f", t.Name, b.order)
		}
		if t.Spec.DefaultAction == nil || *t.Spec.DefaultAction != b.action {
			errs.Addf(sp.Child("defaultAction"), "the built-in %s tier must have default action %s", t.Name, b.action)
		}
	}
	return errs
}
