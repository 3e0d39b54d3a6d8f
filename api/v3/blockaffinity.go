package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindBlockAffinity is the kind of the record that an IPAM block is affine
// to a node.
const KindBlockAffinity = "BlockAffinity"

// BlockAffinity records that a node has claimed (or is claiming, or
// releasing) a block. It is IPAM's bookkeeping, written by IPAM.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=blockaffinities
type BlockAffinity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BlockAffinitySpec `json:"spec,omitempty"`
}

// BlockAffinitySpec is the content of a BlockAffinity.
type BlockAffinitySpec struct {
	// State of the claim: pending (being claimed), confirmed (the block is
	// the node's) or pendingDeletion (being released).
	State BlockAffinityState `json:"state"`
	// Node is the node (or virtual host) the block is affine to.
	Node string `json:"node"`
	// Type is the kind of affinity: host (a node) or virtual. Unset means
	// host.
	Type string `json:"type,omitempty"`
	// CIDR of the block.
	CIDR string `json:"cidr"`
	// Deleted marks an affinity being deleted, so a concurrent writer gets a
	// conflict; clients treat it as absent. Not for users.
	Deleted bool `json:"deleted"`
}

// BlockAffinityState is the state of a block affinity.
// +kubebuilder:validation:Enum="";confirmed;pending;pendingDeletion
type BlockAffinityState string

// Block affinity states.
const (
	BlockAffinityStateConfirmed       BlockAffinityState = "confirmed"
	BlockAffinityStatePending         BlockAffinityState = "pending"
	BlockAffinityStatePendingDeletion BlockAffinityState = "pendingDeletion"
)

// Block affinity types.
const (
	BlockAffinityTypeHost    = "host"
	BlockAffinityTypeVirtual = "virtual"
)

// BlockAffinityList is a list of BlockAffinity.
// +kubebuilder:object:root=true
type BlockAffinityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BlockAffinity `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindBlockAffinity, Plural: "blockaffinities",
		New:     func() Resource { return &BlockAffinity{TypeMeta: typeMeta(KindBlockAffinity)} },
		NewList: func() runtimeObject { return &BlockAffinityList{TypeMeta: typeMeta(KindBlockAffinity + "List")} },
	})
}

// Default implements Resource; BlockAffinity has no defaults.
func (a *BlockAffinity) Default() {}

// Validate implements Resource.
//
// Calico's v3 validator also rejects deleted: true, but only on its
// user-facing client; IPAM itself writes deleted affinities. Tabby
// validates every write, so deleted: true is allowed here.
func (a *BlockAffinity) Validate() ErrorList {
	errs := validateMeta(&a.ObjectMeta, false)
	p := Path("spec")
	s := &a.Spec
	oneOf(p.Child("state"), string(s.State), &errs,
		string(BlockAffinityStateConfirmed), string(BlockAffinityStatePending), string(BlockAffinityStatePendingDeletion))
	if s.Node == "" {
		errs.Add(p.Child("node"), "is required")
	} else {
		netCheckResourceName(p.Child("node"), s.Node, &errs)
	}
	oneOf(p.Child("type"), s.Type, &errs, BlockAffinityTypeHost, BlockAffinityTypeVirtual)
	if s.CIDR == "" {
		errs.Add(p.Child("cidr"), "is required")
	} else {
		netStrictNet(p.Child("cidr"), s.CIDR, 0, &errs)
	}
	return errs
}
