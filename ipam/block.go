package ipam

import (
	"fmt"
	"maps"
	"net/netip"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Attribute keys of an allocation's owner, as Calico writes them.
const (
	AttrNamespace = "namespace"
	AttrPod       = "pod"
	AttrNode      = "node"
	// AttrType marks non-pod allocations, e.g. "ipipTunnelAddress".
	AttrType = "type"
)

// NewBlock returns an empty block affine to node (no affinity when node is
// empty): every ordinal free, to be used in ascending order as Calico does.
func NewBlock(cidr netip.Prefix, node string, now metav1.Time) *v3.IPAMBlock {
	size := BlockSizeOf(cidr)
	b := &v3.IPAMBlock{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPAMBlock, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: BlockName(cidr)},
		Spec: v3.IPAMBlockSpec{
			CIDR:                        cidr.String(),
			Allocations:                 make([]*int, size),
			Unallocated:                 make([]int, size),
			Attributes:                  []v3.AllocationAttribute{},
			SequenceNumberForAllocation: map[string]uint64{},
		},
	}
	for i := range size {
		b.Spec.Unallocated[i] = i
	}
	if node != "" {
		a := AffinityValue(node)
		b.Spec.Affinity = &a
		b.Spec.AffinityClaimTime = &now
	}
	return b
}

// BlockCIDR parses a block's CIDR.
func BlockCIDR(b *v3.IPAMBlock) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(b.Spec.CIDR)
	if err != nil {
		return p, fmt.Errorf("block %s: bad cidr %q: %w", b.Name, b.Spec.CIDR, err)
	}
	return p, nil
}

// Allocated is one address allocated in a block, with its owner.
type Allocated struct {
	IP      netip.Addr
	Ordinal int
	Handle  string
	Attrs   map[string]string
	Seq     uint64 // the block's sequence number when it was allocated
}

// FreeCount returns how many addresses of b could be allocated now (free
// and not reserved).
func FreeCount(b *v3.IPAMBlock, reserved Reservations) int {
	cidr, err := BlockCIDR(b)
	if err != nil {
		return 0
	}
	n := 0
	for _, o := range b.Spec.Unallocated {
		if !reserved.Contains(OrdinalToIP(cidr, o)) {
			n++
		}
	}
	return n
}

// AssignFromBlock allocates up to n free, unreserved addresses of b to
// handle, in the block's free order (lowest first in a fresh block, released
// addresses last). It changes b and returns what it allocated.
func AssignFromBlock(b *v3.IPAMBlock, n int, handle string, attrs map[string]string, reserved Reservations) []netip.Addr {
	cidr, err := BlockCIDR(b)
	if err != nil || n <= 0 {
		return nil
	}
	var got []netip.Addr
	var keep []int
	attrIdx := -1
	for i, o := range b.Spec.Unallocated {
		ip := OrdinalToIP(cidr, o)
		if len(got) == n || reserved.Contains(ip) {
			keep = append(keep, o)
			continue
		}
		if attrIdx < 0 {
			attrIdx = attributeIndex(b, handle, attrs)
		}
		idx := attrIdx
		b.Spec.Allocations[o] = &idx
		if b.Spec.SequenceNumberForAllocation == nil {
			b.Spec.SequenceNumberForAllocation = map[string]uint64{}
		}
		b.Spec.SequenceNumberForAllocation[strconv.Itoa(o)] = b.Spec.SequenceNumber
		got = append(got, ip)
		if len(got) == n {
			keep = append(keep, b.Spec.Unallocated[i+1:]...)
			break
		}
	}
	if len(got) > 0 {
		b.Spec.Unallocated = append([]int{}, keep...)
		b.Spec.SequenceNumber++
	}
	return got
}

// AssignOrdinal allocates one specific address of b. It fails with ErrInUse
// when the address is taken.
func AssignOrdinal(b *v3.IPAMBlock, ip netip.Addr, handle string, attrs map[string]string) error {
	cidr, err := BlockCIDR(b)
	if err != nil {
		return err
	}
	o, ok := IPToOrdinal(cidr, ip)
	if !ok {
		return fmt.Errorf("%s is not in block %s: %w", ip, cidr, ErrInvalidArgs)
	}
	if b.Spec.Allocations[o] != nil {
		return fmt.Errorf("%s: %w", ip, ErrInUse)
	}
	idx := attributeIndex(b, handle, attrs)
	b.Spec.Allocations[o] = &idx
	for i, u := range b.Spec.Unallocated {
		if u == o {
			b.Spec.Unallocated = append(b.Spec.Unallocated[:i:i], b.Spec.Unallocated[i+1:]...)
			break
		}
	}
	if b.Spec.SequenceNumberForAllocation == nil {
		b.Spec.SequenceNumberForAllocation = map[string]uint64{}
	}
	b.Spec.SequenceNumberForAllocation[strconv.Itoa(o)] = b.Spec.SequenceNumber
	b.Spec.SequenceNumber++
	return nil
}

// attributeIndex returns the index of an attribute equal to (handle, attrs),
// appending one when there is none.
func attributeIndex(b *v3.IPAMBlock, handle string, attrs map[string]string) int {
	for i, a := range b.Spec.Attributes {
		if a.HandleID != nil && *a.HandleID == handle && maps.Equal(a.ActiveOwnerAttrs, attrs) && a.AlternateOwnerAttrs == nil {
			return i
		}
	}
	h := handle
	var cp map[string]string
	if len(attrs) > 0 {
		cp = maps.Clone(attrs)
	}
	b.Spec.Attributes = append(b.Spec.Attributes, v3.AllocationAttribute{HandleID: &h, ActiveOwnerAttrs: cp})
	return len(b.Spec.Attributes) - 1
}

// AllocationAt describes the allocation at ordinal o, or false when free.
func AllocationAt(b *v3.IPAMBlock, cidr netip.Prefix, o int) (Allocated, bool) {
	if o < 0 || o >= len(b.Spec.Allocations) || b.Spec.Allocations[o] == nil {
		return Allocated{}, false
	}
	al := Allocated{IP: OrdinalToIP(cidr, o), Ordinal: o, Seq: b.Spec.SequenceNumberForAllocation[strconv.Itoa(o)]}
	if idx := *b.Spec.Allocations[o]; idx >= 0 && idx < len(b.Spec.Attributes) {
		a := b.Spec.Attributes[idx]
		if a.HandleID != nil {
			al.Handle = *a.HandleID
		}
		al.Attrs = a.ActiveOwnerAttrs
	}
	return al, true
}

// Allocations lists every allocation of b in ordinal order.
func Allocations(b *v3.IPAMBlock) []Allocated {
	cidr, err := BlockCIDR(b)
	if err != nil {
		return nil
	}
	var out []Allocated
	for o := range b.Spec.Allocations {
		if al, ok := AllocationAt(b, cidr, o); ok {
			out = append(out, al)
		}
	}
	return out
}

// ReleaseOrdinals frees the given ordinals of b (free ones are ignored),
// returning the allocations it freed. Freed ordinals go to the back of the
// free list, so a released address is reused last.
func ReleaseOrdinals(b *v3.IPAMBlock, ords []int) []Allocated {
	cidr, err := BlockCIDR(b)
	if err != nil {
		return nil
	}
	var freed []Allocated
	for _, o := range ords {
		al, ok := AllocationAt(b, cidr, o)
		if !ok {
			continue
		}
		b.Spec.Allocations[o] = nil
		b.Spec.Unallocated = append(b.Spec.Unallocated, o)
		delete(b.Spec.SequenceNumberForAllocation, strconv.Itoa(o))
		freed = append(freed, al)
	}
	if len(freed) > 0 {
		compactAttributes(b)
		b.Spec.SequenceNumber++
	}
	return freed
}

// ReleaseHandle frees every address of b held by handle.
func ReleaseHandle(b *v3.IPAMBlock, handle string) []Allocated {
	var ords []int
	for _, al := range Allocations(b) {
		if al.Handle == handle {
			ords = append(ords, al.Ordinal)
		}
	}
	return ReleaseOrdinals(b, ords)
}

// compactAttributes drops attributes no allocation refers to and renumbers
// the rest, keeping their order.
func compactAttributes(b *v3.IPAMBlock) {
	used := make([]bool, len(b.Spec.Attributes))
	for _, a := range b.Spec.Allocations {
		if a != nil && *a >= 0 && *a < len(used) {
			used[*a] = true
		}
	}
	remap := make([]int, len(used))
	attrs := []v3.AllocationAttribute{}
	for i, u := range used {
		if u {
			remap[i] = len(attrs)
			attrs = append(attrs, b.Spec.Attributes[i])
		}
	}
	for o, a := range b.Spec.Allocations {
		if a != nil && *a >= 0 && *a < len(remap) {
			v := remap[*a]
			b.Spec.Allocations[o] = &v
		}
	}
	b.Spec.Attributes = attrs
}

// IsEmpty says whether b has no allocations.
func IsEmpty(b *v3.IPAMBlock) bool {
	for _, a := range b.Spec.Allocations {
		if a != nil {
			return false
		}
	}
	return true
}

// CheckBlock verifies a block's bookkeeping: every ordinal is either
// allocated or free exactly once, attribute indexes are in range, no
// attribute is unreferenced, every allocation has a handle and a sequence
// number, and no free ordinal has one. It returns the problems found.
func CheckBlock(b *v3.IPAMBlock) []string {
	var probs []string
	cidr, err := BlockCIDR(b)
	if err != nil {
		return []string{err.Error()}
	}
	size := BlockSizeOf(cidr)
	if len(b.Spec.Allocations) != size {
		probs = append(probs, fmt.Sprintf("%s: %d allocation entries, want %d", cidr, len(b.Spec.Allocations), size))
		return probs
	}
	free := make([]int, size)
	for _, o := range b.Spec.Unallocated {
		if o < 0 || o >= size {
			probs = append(probs, fmt.Sprintf("%s: free ordinal %d out of range", cidr, o))
			continue
		}
		free[o]++
	}
	used := make([]bool, len(b.Spec.Attributes))
	for o, a := range b.Spec.Allocations {
		_, hasSeq := b.Spec.SequenceNumberForAllocation[strconv.Itoa(o)]
		if a == nil {
			if free[o] != 1 {
				probs = append(probs, fmt.Sprintf("%s: free ordinal %d listed %d times in unallocated", cidr, o, free[o]))
			}
			if hasSeq {
				probs = append(probs, fmt.Sprintf("%s: free ordinal %d has a sequence number", cidr, o))
			}
			continue
		}
		if free[o] != 0 {
			probs = append(probs, fmt.Sprintf("%s: allocated ordinal %d also listed as free", cidr, o))
		}
		if !hasSeq {
			probs = append(probs, fmt.Sprintf("%s: ordinal %d has no sequence number", cidr, o))
		}
		if *a < 0 || *a >= len(used) {
			probs = append(probs, fmt.Sprintf("%s: ordinal %d has attribute index %d of %d", cidr, o, *a, len(used)))
			continue
		}
		used[*a] = true
		if h := b.Spec.Attributes[*a].HandleID; h == nil || *h == "" {
			probs = append(probs, fmt.Sprintf("%s: ordinal %d has no handle", cidr, o))
		}
	}
	for i, u := range used {
		if !u {
			probs = append(probs, fmt.Sprintf("%s: attribute %d is unreferenced", cidr, i))
		}
	}
	return probs
}
