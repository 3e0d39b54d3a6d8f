package v3

import (
	"errors"
	"fmt"
	"reflect"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindStagedKubernetesNetworkPolicy is the kind of a staged (not
// enforced) Kubernetes NetworkPolicy.
const KindStagedKubernetesNetworkPolicy = "StagedKubernetesNetworkPolicy"

// StagedKubernetesNetworkPolicy is a Kubernetes NetworkPolicy proposed but
// not enforced: stagedAction says whether it would set or delete the
// NetworkPolicy of the same name. It is stored and served; felix ignores
// it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=stagedkubernetesnetworkpolicies
type StagedKubernetesNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec StagedKubernetesNetworkPolicySpec `json:"spec,omitempty"`
}

// StagedKubernetesNetworkPolicySpec is a Kubernetes NetworkPolicySpec with
// a stagedAction.
type StagedKubernetesNetworkPolicySpec struct {
	// StagedAction is Set (the default), Delete, Learn or Ignore. With
	// Delete every other field must be empty.
	// +kubebuilder:default=Set
	StagedAction StagedAction `json:"stagedAction,omitempty"`
	// PodSelector selects the pods of the namespace the policy applies to;
	// empty selects all of them.
	// +optional
	PodSelector metav1.LabelSelector `json:"podSelector"`
	// Ingress rules, as in a Kubernetes NetworkPolicy.
	// +optional
	Ingress []networkingv1.NetworkPolicyIngressRule `json:"ingress,omitempty"`
	// Egress rules, as in a Kubernetes NetworkPolicy.
	// +optional
	Egress []networkingv1.NetworkPolicyEgressRule `json:"egress,omitempty"`
	// PolicyTypes: Ingress, Egress or both.
	// +optional
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	PolicyTypes []networkingv1.PolicyType `json:"policyTypes,omitempty"`
}

// StagedKubernetesNetworkPolicyList is a list of
// StagedKubernetesNetworkPolicy.
// +kubebuilder:object:root=true
type StagedKubernetesNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StagedKubernetesNetworkPolicy `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindStagedKubernetesNetworkPolicy, Plural: "stagedkubernetesnetworkpolicies", Namespaced: true,
		New: func() Resource {
			return &StagedKubernetesNetworkPolicy{TypeMeta: typeMeta(KindStagedKubernetesNetworkPolicy)}
		},
		NewList: func() runtimeObject {
			return &StagedKubernetesNetworkPolicyList{TypeMeta: typeMeta(KindStagedKubernetesNetworkPolicy + "List")}
		},
	})
}

// Default implements Resource: stagedAction Set, as Calico's CRD defaults
// it. (Calico's client defaults nothing else for this kind.)
func (p *StagedKubernetesNetworkPolicy) Default() {
	stgDefaultAction(&p.Spec.StagedAction)
}

// Enforced returns the Kubernetes NetworkPolicy this staged policy would
// set (Calico's ConvertStagedKubernetesPolicyToK8SEnforced), and its
// staged action.
func (p *StagedKubernetesNetworkPolicy) Enforced() (StagedAction, *networkingv1.NetworkPolicy) {
	s := p.Spec.DeepCopy()
	meta := p.ObjectMeta.DeepCopy()
	meta.ResourceVersion, meta.UID = "", ""
	return s.StagedAction, &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: *meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: s.PodSelector, Ingress: s.Ingress, Egress: s.Egress, PolicyTypes: s.PolicyTypes,
		},
	}
}

// Validate implements Resource as Calico's validator does: a Delete sets
// nothing else; otherwise the policy must convert to a valid Calico
// NetworkPolicy: selectors that render to valid Calico selectors, ports
// and port ranges Calico parses, protocols TCP, UDP or SCTP, and policy
// types Ingress or Egress. (Calico drops an ipBlock whose CIDR does not
// parse rather than refusing the policy; so does this.)
func (p *StagedKubernetesNetworkPolicy) Validate() ErrorList {
	sp := Path("spec")
	errs := validateMeta(&p.ObjectMeta, true)
	stgCheckAction(sp.Child("stagedAction"), p.Spec.StagedAction, &errs)
	if p.Spec.StagedAction == StagedActionDelete {
		if !reflect.DeepEqual(p.Spec, StagedKubernetesNetworkPolicySpec{StagedAction: StagedActionDelete}) {
			errs.Add(sp, "with stagedAction Delete, every other field must be empty")
		}
		return errs
	}
	s := &p.Spec
	stgCheckK8sSelector(sp.Child("podSelector"), &s.PodSelector, true, &errs)
	for i, r := range s.Ingress {
		rp := sp.Child("ingress").Index(i)
		stgCheckK8sPeers(rp.Child("from"), r.From, &errs)
		stgCheckK8sPorts(rp.Child("ports"), r.Ports, &errs)
	}
	for i, r := range s.Egress {
		rp := sp.Child("egress").Index(i)
		stgCheckK8sPeers(rp.Child("to"), r.To, &errs)
		stgCheckK8sPorts(rp.Child("ports"), r.Ports, &errs)
	}
	seen := map[networkingv1.PolicyType]bool{}
	for i, t := range s.PolicyTypes {
		tp := sp.Child("policyTypes").Index(i)
		if oneOf(tp, string(t), &errs, string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)) && seen[t] {
			errs.Addf(tp, "%q is listed twice", t)
		}
		seen[t] = true
	}
	return errs
}

func stgCheckK8sPeers(p Path, peers []networkingv1.NetworkPolicyPeer, errs *ErrorList) {
	for i, peer := range peers {
		pp := p.Index(i)
		if peer.IPBlock != nil {
			continue // Calico ignores the selectors of an ipBlock peer
		}
		if peer.PodSelector != nil {
			stgCheckK8sSelector(pp.Child("podSelector"), peer.PodSelector, true, errs)
		}
		if peer.NamespaceSelector != nil {
			stgCheckK8sSelector(pp.Child("namespaceSelector"), peer.NamespaceSelector, false, errs)
		}
	}
}

func stgCheckK8sPorts(p Path, ports []networkingv1.NetworkPolicyPort, errs *ErrorList) {
	for i, port := range ports {
		pp := p.Index(i)
		if port.Protocol != nil {
			oneOf(pp.Child("protocol"), string(*port.Protocol), errs, "TCP", "UDP", "SCTP")
		}
		if port.Port == nil {
			continue
		}
		s := port.Port.String()
		if port.EndPort != nil {
			s = fmt.Sprintf("%s:%d", s, *port.EndPort)
		}
		if _, err := numorstring.PortFromString(s); err != nil {
			errs.Addf(pp.Child("port"), "invalid port %q: %v", s, err)
		}
	}
}

// stgCheckK8sSelector renders a Kubernetes label selector the way Calico
// converts it (K8sSelectorToCalico) and checks the result parses as a
// Calico selector.
func stgCheckK8sSelector(p Path, s *metav1.LabelSelector, pod bool, errs *ErrorList) {
	sel, err := K8sSelectorToCalico(s, pod)
	var oe *K8sOperatorError
	if errors.As(err, &oe) {
		errs.Addf(p.Child("matchExpressions").Index(oe.Index).Child("operator"),
			"%q is not one of In, NotIn, Exists, DoesNotExist", oe.Operator)
		return
	}
	errs.Extend(validateSelector(p, sel))
}
