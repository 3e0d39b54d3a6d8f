package v3

import (
	"net"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindIPAMBlock is the kind of one block of an IP pool: the unit of address
// space IPAM affines to a node, with a record of which addresses are used.
const KindIPAMBlock = "IPAMBlock"

// IPAMBlock records the allocations within one block of addresses. It is
// IPAM's bookkeeping, written by IPAM and not by users. Its JSON field names
// (including the snake_case ones of attributes) are Calico's stored format.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=ipamblocks
type IPAMBlock struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAMBlockSpec `json:"spec,omitempty"`
}

// IPAMBlockSpec is the content of an IPAMBlock.
type IPAMBlockSpec struct {
	// CIDR of the block, e.g. 10.244.3.64/26.
	CIDR string `json:"cidr"`
	// Affinity is "host:<node>" or "virtual:<name>" when the block is affine
	// to a node (or virtual host); unset when it is not.
	Affinity *string `json:"affinity,omitempty"`
	// AffinityClaimTime is when the affinity was claimed.
	AffinityClaimTime *metav1.Time `json:"affinityClaimTime,omitempty"`
	// Allocations has one entry per address of the block, by ordinal (the
	// offset from the block's first address). null means the address is
	// free; otherwise the value indexes attributes.
	Allocations []*int `json:"allocations"`
	// Unallocated lists the free ordinals in the order they will be used.
	Unallocated []int `json:"unallocated"`
	// Attributes are the metadata of allocations, referred to by index from
	// allocations; several allocations may share one.
	Attributes []AllocationAttribute `json:"attributes"`
	// SequenceNumber increases each time the block is written. A release
	// that names the sequence number of its allocation cannot free an
	// address that has since been released and reassigned.
	// +kubebuilder:default=0
	// +optional
	SequenceNumber uint64 `json:"sequenceNumber"`
	// SequenceNumberForAllocation maps an allocated ordinal (as a decimal
	// string) to the block's sequence number when it was allocated.
	// +optional
	SequenceNumberForAllocation map[string]uint64 `json:"sequenceNumberForAllocation"`
	// Deleted marks a block being deleted, so a concurrent writer gets a
	// conflict instead of resurrecting it. Not for users.
	// +optional
	Deleted bool `json:"deleted"`
	// DeprecatedStrictAffinity is unused; IPAMConfiguration strictAffinity
	// replaces it. Kept so stored blocks decode.
	DeprecatedStrictAffinity bool `json:"strictAffinity"`
}

// AllocationAttribute is the metadata of one or more allocations.
type AllocationAttribute struct {
	// HandleID is the IPAM handle that owns the allocation.
	HandleID *string `json:"handle_id,omitempty"`
	// ActiveOwnerAttrs describe the allocation's owner (e.g. namespace,
	// pod, node).
	ActiveOwnerAttrs map[string]string `json:"secondary,omitempty"`
	// AlternateOwnerAttrs describe a second owner sharing the address, such
	// as the target pod of a live migration.
	AlternateOwnerAttrs map[string]string `json:"alternateOwnerAttrs,omitempty"`
}

// IPAMBlockList is a list of IPAMBlock.
// +kubebuilder:object:root=true
type IPAMBlockList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAMBlock `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindIPAMBlock, Plural: "ipamblocks",
		New:     func() Resource { return &IPAMBlock{TypeMeta: typeMeta(KindIPAMBlock)} },
		NewList: func() runtimeObject { return &IPAMBlockList{TypeMeta: typeMeta(KindIPAMBlock + "List")} },
	})
}

// Size returns the number of addresses in the block, or 0 when the CIDR
// does not parse or the block is implausibly large (over 2^20 addresses).
func (b *IPAMBlock) Size() int {
	_, n, err := net.ParseCIDR(b.Spec.CIDR)
	if err != nil {
		return 0
	}
	ones, bits := n.Mask.Size()
	if bits-ones > 20 {
		return 0
	}
	return 1 << (bits - ones)
}

// Default implements Resource; IPAMBlock has no defaults.
func (b *IPAMBlock) Default() {}

var netBlockAffinityRE = lazyRegexp(`^(host|virtual):[a-zA-Z0-9.\-_]+$`)

// Validate checks the block's bookkeeping is consistent: a strictly masked
// CIDR of a block size pools allow, one allocation entry per address,
// attribute indexes in range, and free ordinals in range and not allocated.
func (b *IPAMBlock) Validate() ErrorList {
	errs := validateMeta(&b.ObjectMeta, false)
	p := Path("spec")
	s := &b.Spec

	size := 0
	if s.CIDR == "" {
		errs.Add(p.Child("cidr"), "is required")
	} else if ip, n, err := net.ParseCIDR(s.CIDR); err != nil {
		errs.Addf(p.Child("cidr"), "%q is not a valid CIDR", s.CIDR)
	} else if !ip.Equal(n.IP) {
		errs.Addf(p.Child("cidr"), "%q has host bits set (did you mean %s?)", s.CIDR, n.String())
	} else {
		ones, bits := n.Mask.Size()
		switch {
		case bits == 32 && ones < 20:
			errs.Addf(p.Child("cidr"), "/%d is outside 20-32 for an IPv4 block", ones)
		case bits == 128 && ones < 116:
			errs.Addf(p.Child("cidr"), "/%d is outside 116-128 for an IPv6 block", ones)
		default:
			size = b.Size()
		}
	}

	if s.Affinity != nil && !netBlockAffinityRE().MatchString(*s.Affinity) {
		errs.Addf(p.Child("affinity"), "%q is not host:<node> or virtual:<name>", *s.Affinity)
	}

	if size > 0 && len(s.Allocations) != size {
		errs.Addf(p.Child("allocations"), "has %d entries; a %s block needs exactly %d (one per address)", len(s.Allocations), s.CIDR, size)
	}
	for i, a := range s.Allocations {
		if a != nil && (*a < 0 || *a >= len(s.Attributes)) {
			errs.Addf(p.Child("allocations").Index(i), "attribute index %d is outside 0-%d (there are %d attributes)", *a, len(s.Attributes)-1, len(s.Attributes))
		}
	}
	seen := map[int]bool{}
	for i, o := range s.Unallocated {
		up := p.Child("unallocated").Index(i)
		switch {
		case o < 0 || (size > 0 && o >= size):
			errs.Addf(up, "ordinal %d is outside 0-%d", o, size-1)
		case o < len(s.Allocations) && s.Allocations[o] != nil:
			errs.Addf(up, "ordinal %d is listed as free but allocations[%d] is in use", o, o)
		case seen[o]:
			errs.Addf(up, "ordinal %d is listed more than once", o)
		}
		seen[o] = true
	}
	keys := make([]string, 0, len(s.SequenceNumberForAllocation))
	for k := range s.SequenceNumberForAllocation {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o, err := strconv.Atoi(k)
		if err != nil || o < 0 || (size > 0 && o >= size) {
			errs.Addf(p.Child("sequenceNumberForAllocation").Key(k), "key %q is not an ordinal of the block (0-%d)", k, size-1)
		}
	}
	return errs
}
