package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindGlobalNetworkSet is the kind of a cluster-wide set of networks.
const KindGlobalNetworkSet = "GlobalNetworkSet"

// GlobalNetworkSet is a labelled set of IP networks, not tied to a
// namespace. Policy rules select it by its labels, like an endpoint.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=globalnetworksets
type GlobalNetworkSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GlobalNetworkSetSpec `json:"spec,omitempty"`
}

// GlobalNetworkSetSpec is the content of a GlobalNetworkSet.
type GlobalNetworkSetSpec struct {
	// Nets are the IP networks (CIDRs or single addresses) in the set.
	// +listType=set
	Nets []string `json:"nets,omitempty"`
}

// GlobalNetworkSetList is a list of GlobalNetworkSet.
// +kubebuilder:object:root=true
type GlobalNetworkSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalNetworkSet `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindGlobalNetworkSet, Plural: "globalnetworksets",
		New:     func() Resource { return &GlobalNetworkSet{TypeMeta: typeMeta(KindGlobalNetworkSet)} },
		NewList: func() runtimeObject { return &GlobalNetworkSetList{TypeMeta: typeMeta(KindGlobalNetworkSet + "List")} },
	})
}

// Default implements Resource; GlobalNetworkSet has no defaults.
func (n *GlobalNetworkSet) Default() {}

// Validate implements Resource.
func (n *GlobalNetworkSet) Validate() ErrorList {
	errs := validateMeta(&n.ObjectMeta, false)
	polCheckNoNamespaceLabel(n.Labels, &errs)
	polCheckSetNets(Path("spec").Child("nets"), n.Spec.Nets, &errs)
	return errs
}
