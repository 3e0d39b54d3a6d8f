package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindIPAMConfiguration is the kind of the single cluster-wide IPAM settings
// object, named "default".
//
// Naming note: in projectcalico.org/v3 the kind is IPAMConfiguration (plural
// ipamconfigurations, which is also the plural of Calico's newer native v3
// CRD). Calico's older crd.projectcalico.org/v1 CRD for the same data is
// named ipamconfigs with kind IPAMConfig. Which CRD name Tabby stores it
// under is decided where the CRDs are generated, not here.
const KindIPAMConfiguration = "IPAMConfiguration"

// IPAMConfiguration holds cluster-wide settings of Calico IPAM.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=ipamconfigurations
type IPAMConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAMConfigurationSpec `json:"spec,omitempty"`
}

// IPAMConfigurationSpec is the content of IPAMConfiguration.
type IPAMConfigurationSpec struct {
	// StrictAffinity, when true, stops a node borrowing addresses from
	// blocks affine to other nodes. [Default: false]
	StrictAffinity bool `json:"strictAffinity"`
	// MaxBlocksPerHost, if non-zero, is the most blocks that may be affine to
	// one node (0-1000000; 0 means no limit).
	MaxBlocksPerHost int32 `json:"maxBlocksPerHost,omitempty"`
	// AutoAllocateBlocks says whether IPAM claims new blocks for nodes as
	// they need them. [Default: true]
	AutoAllocateBlocks *bool `json:"autoAllocateBlocks,omitempty"`
	// IPCooldownSeconds is the least time a released address waits
	// before it may be assigned again (0-1200). 0 allows immediate reuse
	// (released addresses are still reused oldest first).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1200
	IPCooldownSeconds int32 `json:"ipCooldownSeconds,omitempty"`
	// KubeVirtVMAddressPersistence says whether KubeVirt virtual machines
	// keep their IP addresses when their pods are recreated (reboot,
	// migration, eviction): Enabled or Disabled. Live migration needs it.
	// [Default: Enabled]
	KubeVirtVMAddressPersistence *VMAddressPersistence `json:"kubeVirtVMAddressPersistence,omitempty"`
}

// VMAddressPersistence is Enabled or Disabled.
// +kubebuilder:validation:Enum=Enabled;Disabled
type VMAddressPersistence string

// Values of IPAMConfigurationSpec.KubeVirtVMAddressPersistence.
const (
	VMAddressPersistenceEnabled  VMAddressPersistence = "Enabled"
	VMAddressPersistenceDisabled VMAddressPersistence = "Disabled"
)

// IPAMConfigurationList is a list of IPAMConfiguration.
// +kubebuilder:object:root=true
type IPAMConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAMConfiguration `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindIPAMConfiguration, Plural: "ipamconfigurations",
		New: func() Resource { return &IPAMConfiguration{TypeMeta: typeMeta(KindIPAMConfiguration)} },
		NewList: func() runtimeObject {
			return &IPAMConfigurationList{TypeMeta: typeMeta(KindIPAMConfiguration + "List")}
		},
	})
}

// Default sets autoAllocateBlocks to true when unset, as Calico's CRD does.
// KubeVirtVMAddressPersistence is left unset: unset means Enabled.
func (c *IPAMConfiguration) Default() {
	if c.Spec.AutoAllocateBlocks == nil {
		t := true
		c.Spec.AutoAllocateBlocks = &t
	}
}

// Validate implements Resource.
func (c *IPAMConfiguration) Validate() ErrorList {
	errs := validateMeta(&c.ObjectMeta, false)
	if c.Name != "" && c.Name != "default" {
		errs.Addf("metadata.name", "must be \"default\" (there is one IPAMConfiguration per cluster), got %q", c.Name)
	}
	p := Path("spec")
	netCheckRange(p.Child("maxBlocksPerHost"), int64(c.Spec.MaxBlocksPerHost), 0, 1000000, &errs)
	netCheckRange(p.Child("ipCooldownSeconds"), int64(c.Spec.IPCooldownSeconds), 0, 1200, &errs)
	if m := c.Spec.KubeVirtVMAddressPersistence; m != nil {
		if *m == "" {
			errs.Add(p.Child("kubeVirtVMAddressPersistence"), "is empty: use Enabled or Disabled")
		}
		oneOf(p.Child("kubeVirtVMAddressPersistence"), string(*m), &errs, string(VMAddressPersistenceEnabled), string(VMAddressPersistenceDisabled))
	}
	return errs
}
