package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindProfile is the kind of a security profile.
const KindProfile = "Profile"

// Profile holds rules and labels that endpoints inherit by naming the
// profile. Profile rules apply after all tiers of policy. In Kubernetes
// Calico keeps one profile per namespace ("kns.<namespace>") and per service
// account ("ksa.<namespace>.<name>").
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=profiles
type Profile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProfileSpec `json:"spec,omitempty"`
}

// ProfileSpec is the content of a Profile.
type ProfileSpec struct {
	// Ingress is the ordered list of ingress rules.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	Ingress []Rule `json:"ingress,omitempty"`
	// Egress is the ordered list of egress rules.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	Egress []Rule `json:"egress,omitempty"`
	// LabelsToApply are labels added to every endpoint that uses the
	// profile; the endpoint's own labels win on a clash.
	LabelsToApply map[string]string `json:"labelsToApply,omitempty"`
}

// ProfileList is a list of Profile.
// +kubebuilder:object:root=true
type ProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Profile `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindProfile, Plural: "profiles",
		New:     func() Resource { return &Profile{TypeMeta: typeMeta(KindProfile)} },
		NewList: func() runtimeObject { return &ProfileList{TypeMeta: typeMeta(KindProfile + "List")} },
	})
}

// Default implements Resource; Profile has no defaults.
func (p *Profile) Default() {}

// Validate implements Resource.
func (p *Profile) Validate() ErrorList {
	errs := validateMeta(&p.ObjectMeta, false)
	sp := Path("spec")
	polCheckRuleCount(sp.Child("ingress"), p.Spec.Ingress, &errs)
	polCheckRuleCount(sp.Child("egress"), p.Spec.Egress, &errs)
	errs.Extend(polValidateRules(sp.Child("ingress"), p.Spec.Ingress, polRuleScope{}))
	errs.Extend(polValidateRules(sp.Child("egress"), p.Spec.Egress, polRuleScope{egress: true}))
	errs.Extend(validateLabels(sp.Child("labelsToApply"), p.Spec.LabelsToApply))
	return errs
}
