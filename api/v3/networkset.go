package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindNetworkSet is the kind of a namespaced set of networks.
const KindNetworkSet = "NetworkSet"

// NetworkSet is a labelled set of IP networks in a namespace. Policy rules
// select it by its labels, like an endpoint.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=networksets
type NetworkSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NetworkSetSpec `json:"spec,omitempty"`
}

// NetworkSetSpec is the content of a NetworkSet.
type NetworkSetSpec struct {
	// Nets are the IP networks (CIDRs or single addresses) in the set.
	// +listType=set
	Nets []string `json:"nets,omitempty"`
}

// NetworkSetList is a list of NetworkSet.
// +kubebuilder:object:root=true
type NetworkSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkSet `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindNetworkSet, Plural: "networksets", Namespaced: true,
		New:     func() Resource { return &NetworkSet{TypeMeta: typeMeta(KindNetworkSet)} },
		NewList: func() runtimeObject { return &NetworkSetList{TypeMeta: typeMeta(KindNetworkSet + "List")} },
	})
}

// Default implements Resource; NetworkSet has no defaults.
func (n *NetworkSet) Default() {}

// Validate implements Resource.
func (n *NetworkSet) Validate() ErrorList {
	errs := validateMeta(&n.ObjectMeta, true)
	polCheckNoNamespaceLabel(n.Labels, &errs)
	polCheckSetNets(Path("spec").Child("nets"), n.Spec.Nets, &errs)
	return errs
}

// polCheckSetNets checks the nets of a (Global)NetworkSet: each a CIDR (host
// bits allowed, as Calico's "cidr" rule allows) or a single address, and no
// duplicates.
func polCheckSetNets(p Path, nets []string, errs *ErrorList) {
	seen := map[string]bool{}
	for i, n := range nets {
		validateCIDR(p.Index(i), n, errs)
		if seen[n] {
			errs.Addf(p.Index(i), "%q is listed more than once", n)
		}
		seen[n] = true
	}
}
