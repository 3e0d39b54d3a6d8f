package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindNetworkPolicy is the kind of a namespaced Calico network policy.
const KindNetworkPolicy = "NetworkPolicy"

// NetworkPolicy is an ordered set of rules applied to the workload endpoints
// of its namespace that its selector matches.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=networkpolicies
type NetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NetworkPolicySpec `json:"spec,omitempty"`
	// Status reports whether the policy was accepted.
	// +optional
	Status *PolicyStatus `json:"status,omitempty"`
}

// NetworkPolicySpec is the content of a NetworkPolicy.
type NetworkPolicySpec struct {
	// Tier is the tier the policy belongs to; it must exist.
	// [Default: default]
	// +kubebuilder:default=default
	Tier string `json:"tier,omitempty"`
	// Order sets the policy's place within its tier: lower first; no order
	// means last. Equal orders go by name.
	Order *float64 `json:"order,omitempty"`
	// Ingress is the ordered list of ingress rules.
	// +listType=atomic
	Ingress []Rule `json:"ingress,omitempty"`
	// Egress is the ordered list of egress rules.
	// +listType=atomic
	Egress []Rule `json:"egress,omitempty"`
	// Selector picks the endpoints the policy applies to (empty: all()).
	Selector string `json:"selector,omitempty"`
	// Types says whether the policy applies to ingress, egress or both.
	// When empty it is filled from the rules present: Ingress when there
	// are no egress rules, Egress when there are only egress rules, both
	// otherwise.
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	Types []PolicyType `json:"types,omitempty"`
	// ServiceAccountSelector further limits the policy to pods whose service
	// account matches.
	ServiceAccountSelector string `json:"serviceAccountSelector,omitempty"`
	// PerformanceHints are hints to the policy engine that never change
	// what the policy enforces.
	// +listType=set
	PerformanceHints []PolicyPerformanceHint `json:"performanceHints,omitempty"`
}

// PolicyStatus reports the state of a policy.
type PolicyStatus struct {
	// Conditions are the latest observations of the policy; "Valid" says
	// whether it passed validation.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NetworkPolicyList is a list of NetworkPolicy.
// +kubebuilder:object:root=true
type NetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkPolicy `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindNetworkPolicy, Plural: "networkpolicies", Namespaced: true,
		New:     func() Resource { return &NetworkPolicy{TypeMeta: typeMeta(KindNetworkPolicy)} },
		NewList: func() runtimeObject { return &NetworkPolicyList{TypeMeta: typeMeta(KindNetworkPolicy + "List")} },
	})
}

// Default implements Resource: the tier defaults to "default" and empty
// types are filled from the rules present.
func (np *NetworkPolicy) Default() {
	if np.Spec.Tier == "" {
		np.Spec.Tier = DefaultTierName
	}
	polDefaultTypes(np.Spec.Ingress, np.Spec.Egress, &np.Spec.Types)
}

// Validate implements Resource.
func (np *NetworkPolicy) Validate() ErrorList {
	errs := validateMeta(&np.ObjectMeta, true)
	if np.Name != "" && !polNetworkPolicyNameRE().MatchString(np.Name) {
		errs.Addf("metadata.name", "%q is not a valid policy name: use lower-case alphanumerics and '-', with at most one '.'", np.Name)
	}
	s := &np.Spec
	sp := Path("spec")
	if s.Tier != "" {
		polCheckTierName(sp.Child("tier"), s.Tier, &errs)
	}
	// Unlike GlobalNetworkPolicy, Calico sets no length limit on these.
	errs.Extend(validateSelector(sp.Child("selector"), s.Selector))
	polCheckNoGlobal(sp.Child("selector"), s.Selector, &errs)
	errs.Extend(validateSelector(sp.Child("serviceAccountSelector"), s.ServiceAccountSelector))
	polCheckNoGlobal(sp.Child("serviceAccountSelector"), s.ServiceAccountSelector, &errs)
	polCheckTypes(sp.Child("types"), s.Types, &errs)
	polCheckPerfHints(sp.Child("performanceHints"), s.PerformanceHints, &errs)
	errs.Extend(polValidateRules(sp.Child("ingress"), s.Ingress, polRuleScope{inPolicy: true}))
	errs.Extend(polValidateRules(sp.Child("egress"), s.Egress, polRuleScope{inPolicy: true, egress: true}))
	return errs
}
