package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindGlobalNetworkPolicy is the kind of a cluster-wide Calico network
// policy.
const KindGlobalNetworkPolicy = "GlobalNetworkPolicy"

// GlobalNetworkPolicy is an ordered set of rules applied to the workload
// endpoints of every namespace, and to host endpoints, that its selectors
// match.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=globalnetworkpolicies
type GlobalNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GlobalNetworkPolicySpec `json:"spec,omitempty"`
}

// GlobalNetworkPolicySpec is the content of a GlobalNetworkPolicy.
type GlobalNetworkPolicySpec struct {
	// Tier is the tier the policy belongs to; it must exist.
	// [Default: default]
	// +kubebuilder:default=default
	Tier string `json:"tier,omitempty"`
	// Order sets the policy's place within its tier: lower first; no order
	// means last. Equal orders go by name.
	Order *float64 `json:"order,omitempty"`
	// Ingress is the ordered list of ingress rules.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	Ingress []Rule `json:"ingress,omitempty"`
	// Egress is the ordered list of egress rules.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	Egress []Rule `json:"egress,omitempty"`
	// Selector picks the endpoints the policy applies to (empty: all()).
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`
	// Types says whether the policy applies to ingress, egress or both.
	// When empty it is filled from the rules present: Ingress when there
	// are no egress rules, Egress when there are only egress rules, both
	// otherwise.
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	Types []PolicyType `json:"types,omitempty"`
	// DoNotTrack applies the rules before connection tracking and marks the
	// packets they allow as untracked. Needs applyOnForward; excludes
	// preDNAT.
	DoNotTrack bool `json:"doNotTrack,omitempty"`
	// PreDNAT applies the rules before DNAT (ingress only). Needs
	// applyOnForward; excludes doNotTrack.
	PreDNAT bool `json:"preDNAT,omitempty"`
	// ApplyOnForward also applies the rules to traffic forwarded through a
	// host endpoint.
	ApplyOnForward bool `json:"applyOnForward,omitempty"`
	// ServiceAccountSelector further limits the policy to pods whose service
	// account matches.
	// +kubebuilder:validation:MaxLength=1024
	ServiceAccountSelector string `json:"serviceAccountSelector,omitempty"`
	// NamespaceSelector further limits the policy to pods in namespaces
	// whose labels match.
	// +kubebuilder:validation:MaxLength=1024
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	// PerformanceHints are hints to the policy engine that never change
	// what the policy enforces.
	// +listType=set
	PerformanceHints []PolicyPerformanceHint `json:"performanceHints,omitempty"`
}

// GlobalNetworkPolicyList is a list of GlobalNetworkPolicy.
// +kubebuilder:object:root=true
type GlobalNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalNetworkPolicy `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindGlobalNetworkPolicy, Plural: "globalnetworkpolicies",
		New: func() Resource { return &GlobalNetworkPolicy{TypeMeta: typeMeta(KindGlobalNetworkPolicy)} },
		NewList: func() runtimeObject {
			return &GlobalNetworkPolicyList{TypeMeta: typeMeta(KindGlobalNetworkPolicy + "List")}
		},
	})
}

// Default implements Resource: the tier defaults to "default" and empty
// types are filled from the rules present.
func (p *GlobalNetworkPolicy) Default() {
	if p.Spec.Tier == "" {
		p.Spec.Tier = DefaultTierName
	}
	polDefaultTypes(p.Spec.Ingress, p.Spec.Egress, &p.Spec.Types)
}

// Validate implements Resource.
func (p *GlobalNetworkPolicy) Validate() ErrorList {
	errs := validateMeta(&p.ObjectMeta, false)
	if p.Name != "" && !polGlobalNetworkPolicyNameRE().MatchString(p.Name) {
		errs.Addf("metadata.name", "%q is not a valid policy name: use lower-case alphanumerics and '-', with at most one '.'", p.Name)
	}
	s := &p.Spec
	sp := Path("spec")
	if s.Tier != "" {
		polCheckTierName(sp.Child("tier"), s.Tier, &errs)
	}
	for _, f := range []struct {
		name, sel string
	}{
		{"selector", s.Selector},
		{"serviceAccountSelector", s.ServiceAccountSelector},
		{"namespaceSelector", s.NamespaceSelector},
	} {
		polCheckSelector(sp.Child(f.name), f.sel, &errs)
		polCheckNoGlobal(sp.Child(f.name), f.sel, &errs)
	}
	polCheckTypes(sp.Child("types"), s.Types, &errs)
	polCheckPerfHints(sp.Child("performanceHints"), s.PerformanceHints, &errs)

	if s.DoNotTrack && s.PreDNAT {
		errs.Add(sp.Child("preDNAT"), "preDNAT and doNotTrack cannot both be true")
	}
	if (s.DoNotTrack || s.PreDNAT) && !s.ApplyOnForward {
		errs.Add(sp.Child("applyOnForward"), "must be true when preDNAT or doNotTrack is true")
	}
	if s.PreDNAT {
		if len(s.Egress) > 0 {
			errs.Add(sp.Child("egress"), "a preDNAT policy cannot have egress rules")
		}
		for i, t := range s.Types {
			if t == PolicyTypeEgress {
				errs.Add(sp.Child("types").Index(i), "a preDNAT policy cannot have type Egress")
			}
		}
	}

	polCheckRuleCount(sp.Child("ingress"), s.Ingress, &errs)
	polCheckRuleCount(sp.Child("egress"), s.Egress, &errs)
	errs.Extend(polValidateRules(sp.Child("ingress"), s.Ingress, polRuleScope{inPolicy: true, global: true}))
	errs.Extend(polValidateRules(sp.Child("egress"), s.Egress, polRuleScope{inPolicy: true, egress: true, global: true}))
	return errs
}
