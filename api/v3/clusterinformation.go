package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindClusterInformation is the kind of the single cluster-wide object
// (named "default") that records the cluster's identity and readiness.
const KindClusterInformation = "ClusterInformation"

// ClusterInformation holds cluster-wide facts written by Tabby itself.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=clusterinformations
type ClusterInformation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterInformationSpec `json:"spec,omitempty"`
}

// ClusterInformationSpec is the content of ClusterInformation.
type ClusterInformationSpec struct {
	// ClusterGUID is a unique identifier for the cluster.
	ClusterGUID string `json:"clusterGUID,omitempty"`
	// ClusterType describes the type of the cluster (e.g. "k8s,bgp,kdd").
	ClusterType string `json:"clusterType,omitempty"`
	// CalicoVersion is the version of the software that last wrote this.
	CalicoVersion string `json:"calicoVersion,omitempty"`
	// DatastoreReady is false while the datastore is being upgraded or set
	// up; components wait while it is false.
	DatastoreReady *bool `json:"datastoreReady,omitempty"`
	// Variant is the product variant ("Calico"; Tabby writes "Tabby").
	Variant string `json:"variant,omitempty"`
}

// ClusterInformationList is a list of ClusterInformation.
// +kubebuilder:object:root=true
type ClusterInformationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterInformation `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindClusterInformation, Plural: "clusterinformations", ReadOnly: true,
		New: func() Resource { return &ClusterInformation{TypeMeta: typeMeta(KindClusterInformation)} },
		NewList: func() runtimeObject {
			return &ClusterInformationList{TypeMeta: typeMeta(KindClusterInformation + "List")}
		},
	})
}

// Default implements Resource; ClusterInformation has no defaults.
func (c *ClusterInformation) Default() {}

// Validate implements Resource.
func (c *ClusterInformation) Validate() ErrorList {
	errs := validateMeta(&c.ObjectMeta, false)
	if c.Name != "" && c.Name != "default" {
		errs.Addf("metadata.name", "must be \"default\" (there is one ClusterInformation per cluster), got %q", c.Name)
	}
	return errs
}
