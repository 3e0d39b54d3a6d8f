package crdv1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Kinds of the custom resources in this package.
const (
	KindBlockAffinity = "BlockAffinity"
	KindIPAMConfig    = "IPAMConfig"
	// IPAMConfigPlural is the resource name of IPAMConfig objects.
	IPAMConfigPlural = "ipamconfigs"
	// IPAMConfigName is the name of the one IPAMConfig object Calico reads.
	IPAMConfigName = "default"
)

// BlockAffinity is the stored form of a v3 BlockAffinity.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=blockaffinities
type BlockAffinity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BlockAffinitySpec `json:"spec,omitempty"`
}

// BlockAffinitySpec says which node holds which block, and in what state.
type BlockAffinitySpec struct {
	State string `json:"state"`
	Node  string `json:"node"`
	Type  string `json:"type,omitempty"`
	CIDR  string `json:"cidr"`
	// Deleted is "true" while the affinity is being deleted (clients treat
	// it as absent), else "false" or empty. Calico's CRD keeps it a string
	// because old releases wrote one.
	Deleted string `json:"deleted"`
}

// BlockAffinityList is a list of BlockAffinity.
// +kubebuilder:object:root=true
type BlockAffinityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []BlockAffinity `json:"items"`
}

// IPAMConfig is the stored form of the v3 IPAMConfiguration.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=ipamconfigs
type IPAMConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAMConfigSpec `json:"spec,omitempty"`
}

// IPAMConfigSpec is the cluster's IPAM settings.
type IPAMConfigSpec struct {
	StrictAffinity     bool `json:"strictAffinity"`
	AutoAllocateBlocks bool `json:"autoAllocateBlocks"`

	// MaxBlocksPerHost limits how many blocks one node may hold (0: no limit).
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=2147483647
	// +optional
	MaxBlocksPerHost int `json:"maxBlocksPerHost,omitempty"`

	// KubeVirtVMAddressPersistence says whether KubeVirt virtual machines
	// keep their IP addresses when their pods are recreated (reboot,
	// migration, eviction): Enabled or Disabled. Unset means Enabled.
	// +kubebuilder:validation:Enum=Enabled;Disabled
	// +optional
	KubeVirtVMAddressPersistence *string `json:"kubeVirtVMAddressPersistence,omitempty"`
}

// IPAMConfigList is a list of IPAMConfig.
// +kubebuilder:object:root=true
type IPAMConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []IPAMConfig `json:"items"`
}
