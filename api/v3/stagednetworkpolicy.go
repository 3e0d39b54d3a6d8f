package v3

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindStagedNetworkPolicy is the kind of a staged (not enforced)
// NetworkPolicy.
const KindStagedNetworkPolicy = "StagedNetworkPolicy"

// StagedNetworkPolicy is a NetworkPolicy proposed but not enforced:
// stagedAction says whether it would set or delete the policy of the same
// name. It is stored and served; felix ignores it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=stagednetworkpolicies
type StagedNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec StagedNetworkPolicySpec `json:"spec,omitempty"`
}

// StagedNetworkPolicySpec is a NetworkPolicySpec with a stagedAction.
type StagedNetworkPolicySpec struct {
	// StagedAction is Set (the default), Delete, Learn or Ignore. With
	// Delete every other field except tier must be empty.
	// +kubebuilder:default=Set
	StagedAction StagedAction `json:"stagedAction,omitempty"`
	// Tier is the tier the policy belongs to. [Default: default]
	// +kubebuilder:default=default
	Tier string `json:"tier,omitempty"`
	// Order sets the policy's place within its tier: lower first.
	Order *float64 `json:"order,omitempty"`
	// Ingress is the ordered list of ingress rules (at most 1024).
	// +listType=atomic
	Ingress []Rule `json:"ingress,omitempty"`
	// Egress is the ordered list of egress rules (at most 1024).
	// +listType=atomic
	Egress []Rule `json:"egress,omitempty"`
	// Selector picks the endpoints the policy would apply to.
	Selector string `json:"selector,omitempty"`
	// Types says whether the policy applies to ingress, egress or both;
	// filled from the rules when empty (left empty with Delete).
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	Types []PolicyType `json:"types,omitempty"`
	// ServiceAccountSelector further limits the policy by service account.
	ServiceAccountSelector string `json:"serviceAccountSelector,omitempty"`
	// PerformanceHints: see NetworkPolicySpec.
	// +listType=set
	PerformanceHints []PolicyPerformanceHint `json:"performanceHints,omitempty"`
}

// StagedNetworkPolicyList is a list of StagedNetworkPolicy.
// +kubebuilder:object:root=true
type StagedNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StagedNetworkPolicy `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindStagedNetworkPolicy, Plural: "stagednetworkpolicies", Namespaced: true,
		New: func() Resource { return &StagedNetworkPolicy{TypeMeta: typeMeta(KindStagedNetworkPolicy)} },
		NewList: func() runtimeObject {
			return &StagedNetworkPolicyList{TypeMeta: typeMeta(KindStagedNetworkPolicy + "List")}
		},
	})
}

// Default implements Resource as Calico's client does: stagedAction Set,
// tier "default", and types from the rules, except that a Delete has no
// types.
func (p *StagedNetworkPolicy) Default() {
	stgDefaultAction(&p.Spec.StagedAction)
	if p.Spec.Tier == "" {
		p.Spec.Tier = DefaultTierName
	}
	if p.Spec.StagedAction == StagedActionDelete {
		p.Spec.Types = nil
		return
	}
	polDefaultTypes(p.Spec.Ingress, p.Spec.Egress, &p.Spec.Types)
}

// Enforced returns the NetworkPolicy this staged policy would set
// (Calico's ConvertStagedPolicyToEnforced), and its staged action.
func (p *StagedNetworkPolicy) Enforced() (StagedAction, *NetworkPolicy) {
	s := p.Spec.DeepCopy()
	meta := p.ObjectMeta.DeepCopy()
	meta.ResourceVersion, meta.UID = "", ""
	return s.StagedAction, &NetworkPolicy{
		TypeMeta:   typeMeta(KindNetworkPolicy),
		ObjectMeta: *meta,
		Spec: NetworkPolicySpec{
			Tier: s.Tier, Order: s.Order, Ingress: s.Ingress, Egress: s.Egress,
			Selector: s.Selector, Types: s.Types, ServiceAccountSelector: s.ServiceAccountSelector,
			PerformanceHints: s.PerformanceHints,
		},
	}
}

// Validate implements Resource as Calico's validator does: a Delete may
// set nothing but the tier; anything else must be a valid NetworkPolicy.
func (p *StagedNetworkPolicy) Validate() ErrorList {
	sp := Path("spec")
	var errs ErrorList
	stgCheckAction(sp.Child("stagedAction"), p.Spec.StagedAction, &errs)
	action, enforced := p.Enforced()
	if action == StagedActionDelete {
		errs.Extend(validateMeta(&p.ObjectMeta, true))
		if p.Name != "" && !polNetworkPolicyNameRE().MatchString(p.Name) {
			errs.Addf("metadata.name", "%q is not a valid policy name: use lower-case alphanumerics and '-', with at most one '.'", p.Name)
		}
		if !reflect.DeepEqual(enforced.Spec, NetworkPolicySpec{Tier: enforced.Spec.Tier}) {
			errs.Add(sp, "with stagedAction Delete, every field except tier must be empty")
		}
		if t := enforced.Spec.Tier; t != "" {
			polCheckTierName(sp.Child("tier"), t, &errs)
		}
		return errs
	}
	return append(errs, enforced.Validate()...)
}
