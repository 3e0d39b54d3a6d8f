package v3

import (
	"net"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindIPAMHandle is the kind of the record of which blocks hold the
// addresses of one allocation handle (typically one pod's network).
const KindIPAMHandle = "IPAMHandle"

// IPAMHandle counts the addresses a handle holds in each block, so that all
// of a handle's addresses can be released together. It is IPAM's
// bookkeeping, written by IPAM.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=ipamhandles
type IPAMHandle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAMHandleSpec `json:"spec,omitempty"`
}

// IPAMHandleSpec is the content of an IPAMHandle.
type IPAMHandleSpec struct {
	// HandleID is the handle, e.g. k8s-pod-network.<container ID>.
	HandleID string `json:"handleID"`
	// Block maps a block CIDR to the number of the handle's addresses in it.
	Block map[string]int `json:"block"`
	// Deleted marks a handle being deleted, so a concurrent writer gets a
	// conflict. Not for users.
	// +optional
	Deleted bool `json:"deleted"`
}

// IPAMHandleList is a list of IPAMHandle.
// +kubebuilder:object:root=true
type IPAMHandleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAMHandle `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindIPAMHandle, Plural: "ipamhandles",
		New:     func() Resource { return &IPAMHandle{TypeMeta: typeMeta(KindIPAMHandle)} },
		NewList: func() runtimeObject { return &IPAMHandleList{TypeMeta: typeMeta(KindIPAMHandle + "List")} },
	})
}

// Default implements Resource; IPAMHandle has no defaults.
func (h *IPAMHandle) Default() {}

// Validate implements Resource: a handle ID, and block keys that are
// strictly masked CIDRs with non-negative counts.
func (h *IPAMHandle) Validate() ErrorList {
	errs := validateMeta(&h.ObjectMeta, false)
	p := Path("spec")
	if h.Spec.HandleID == "" {
		errs.Add(p.Child("handleID"), "is required")
	}
	keys := make([]string, 0, len(h.Spec.Block))
	for k := range h.Spec.Block {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kp := p.Child("block").Key(k)
		if _, n, err := net.ParseCIDR(k); err != nil {
			errs.Addf(kp, "key %q is not a block CIDR", k)
		} else if n.String() != k {
			errs.Addf(kp, "key %q is not a block CIDR in canonical form (want %s)", k, n.String())
		}
		if c := h.Spec.Block[k]; c < 0 {
			errs.Addf(kp, "count %d is negative", c)
		}
	}
	return errs
}
