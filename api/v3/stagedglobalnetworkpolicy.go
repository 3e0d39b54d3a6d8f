package v3

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindStagedGlobalNetworkPolicy is the kind of a staged (not enforced)
// GlobalNetworkPolicy.
const KindStagedGlobalNetworkPolicy = "StagedGlobalNetworkPolicy"

// StagedGlobalNetworkPolicy is a GlobalNetworkPolicy proposed but not
// enforced: stagedAction says whether it would set or delete the policy of
// the same name. It is stored and served; felix ignores it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=stagedglobalnetworkpolicies
type StagedGlobalNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec StagedGlobalNetworkPolicySpec `json:"spec,omitempty"`
}

// StagedGlobalNetworkPolicySpec is a GlobalNetworkPolicySpec with a
// stagedAction.
type StagedGlobalNetworkPolicySpec struct {
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
	// DoNotTrack: see GlobalNetworkPolicySpec.
	DoNotTrack bool `json:"doNotTrack,omitempty"`
	// PreDNAT: see GlobalNetworkPolicySpec.
	PreDNAT bool `json:"preDNAT,omitempty"`
	// ApplyOnForward: see GlobalNetworkPolicySpec.
	ApplyOnForward bool `json:"applyOnForward,omitempty"`
	// ServiceAccountSelector further limits the policy by service account.
	ServiceAccountSelector string `json:"serviceAccountSelector,omitempty"`
	// NamespaceSelector further limits the policy by namespace labels.
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	// PerformanceHints: see GlobalNetworkPolicySpec.
	// +listType=set
	PerformanceHints []PolicyPerformanceHint `json:"performanceHints,omitempty"`
}

// StagedGlobalNetworkPolicyList is a list of StagedGlobalNetworkPolicy.
// +kubebuilder:object:root=true
type StagedGlobalNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StagedGlobalNetworkPolicy `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindStagedGlobalNetworkPolicy, Plural: "stagedglobalnetworkpolicies",
		New: func() Resource {
			return &StagedGlobalNetworkPolicy{TypeMeta: typeMeta(KindStagedGlobalNetworkPolicy)}
		},
		NewList: func() runtimeObject {
			return &StagedGlobalNetworkPolicyList{TypeMeta: typeMeta(KindStagedGlobalNetworkPolicy + "List")}
		},
	})
}

// Default implements Resource as Calico's client does: stagedAction Set,
// tier "default", and types from the rules, except that a Delete has no
// types.
func (p *StagedGlobalNetworkPolicy) Default() {
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

// Enforced returns the GlobalNetworkPolicy this staged policy would set
// (Calico's ConvertStagedGlobalPolicyToEnforced), and its staged action.
func (p *StagedGlobalNetworkPolicy) Enforced() (StagedAction, *GlobalNetworkPolicy) {
	s := p.Spec.DeepCopy()
	meta := p.ObjectMeta.DeepCopy()
	meta.ResourceVersion, meta.UID = "", ""
	return s.StagedAction, &GlobalNetworkPolicy{
		TypeMeta:   typeMeta(KindGlobalNetworkPolicy),
		ObjectMeta: *meta,
		Spec: GlobalNetworkPolicySpec{
			Tier: s.Tier, Order: s.Order, Ingress: s.Ingress, Egress: s.Egress,
			Selector: s.Selector, Types: s.Types, DoNotTrack: s.DoNotTrack, PreDNAT: s.PreDNAT,
			ApplyOnForward: s.ApplyOnForward, ServiceAccountSelector: s.ServiceAccountSelector,
			NamespaceSelector: s.NamespaceSelector, PerformanceHints: s.PerformanceHints,
		},
	}
}

// Validate implements Resource as Calico's validator does: a Delete may
// set nothing but the tier; anything else must be a valid
// GlobalNetworkPolicy.
func (p *StagedGlobalNetworkPolicy) Validate() ErrorList {
	sp := Path("spec")
	var errs ErrorList
	stgCheckAction(sp.Child("stagedAction"), p.Spec.StagedAction, &errs)
	action, enforced := p.Enforced()
	if action == StagedActionDelete {
		errs.Extend(validateMeta(&p.ObjectMeta, false))
		if p.Name != "" && !polGlobalNetworkPolicyNameRE().MatchString(p.Name) {
			errs.Addf("metadata.name", "%q is not a valid policy name: use lower-case alphanumerics and '-', with at most one '.'", p.Name)
		}
		if !reflect.DeepEqual(enforced.Spec, GlobalNetworkPolicySpec{Tier: enforced.Spec.Tier}) {
			errs.Add(sp, "with stagedAction Delete, every field except tier must be empty")
		}
		if t := enforced.Spec.Tier; t != "" {
			polCheckTierName(sp.Child("tier"), t, &errs)
		}
		return errs
	}
	return append(errs, enforced.Validate()...)
}
