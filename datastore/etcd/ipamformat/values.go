package ipamformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// The values of the IPAM kinds are libcalico-go's model structs as JSON,
// with no metadata. What the v3 objects carry beyond them:
//   - name: derived from the key (keys.go);
//   - uid: derived from the key and its etcd create revision, so it is
//     stable while the record lives and new when it is recreated;
//   - resourceVersion: the key's mod-revision, as for every kind;
//   - creationTimestamp: not stored; read back as the time of the read
//     (the record's age is unknown, and age-based grace periods, such as
//     the leak check's, must take it as young rather than old);
//   - labels, annotations, finalizers, owner references: not stored; a
//     write that carries any is refused rather than losing them.
// Fields of the model that v3 lacks (an allocation's releasedAt, for IP
// cooldown) make a record undecodable, never silently dropped.

// Block is Calico's AllocationBlock.
type Block struct {
	CIDR                        string            `json:"cidr"`
	Affinity                    *string           `json:"affinity"`
	AffinityClaimTime           *metav1.Time      `json:"affinity_claim_time,omitempty"`
	Allocations                 []*int            `json:"allocations"`
	Unallocated                 []int             `json:"unallocated"`
	Attributes                  []Attribute       `json:"attributes"`
	SequenceNumber              uint64            `json:"sequenceNumber"`
	SequenceNumberForAllocation map[string]uint64 `json:"sequenceNumberForAllocation"`
	Deleted                     bool              `json:"deleted"`
	HostAffinity                *string           `json:"hostAffinity,omitempty"`
	StrictAffinity              bool              `json:"strictAffinity,omitempty"` // older Calico wrote it (always false)
}

// Attribute is Calico's AllocationAttribute.
type Attribute struct {
	HandleID            *string           `json:"handle_id,omitempty"`
	ActiveOwnerAttrs    map[string]string `json:"secondary,omitempty"`
	AlternateOwnerAttrs map[string]string `json:"alternateOwnerAttrs,omitempty"`
	ReleasedAt          *metav1.Time      `json:"releasedAt,omitempty"`
}

// Affinity is Calico's BlockAffinity.
type Affinity struct {
	State   string `json:"state"`
	Deleted bool   `json:"deleted"`
}

// Handle is Calico's IPAMHandle (its ID is the key).
type Handle struct {
	Block   map[string]int `json:"block"`
	Deleted bool           `json:"deleted"`
}

// Config is Calico's IPAMConfig.
type Config struct {
	StrictAffinity               bool    `json:"strict_affinity,omitempty"`
	AutoAllocateBlocks           bool    `json:"auto_allocate_blocks,omitempty"`
	MaxBlocksPerHost             int     `json:"maxBlocksPerHost,omitempty"`
	KubeVirtVMAddressPersistence *string `json:"kubeVirtVMAddressPersistence,omitempty"`
	IPCooldownSeconds            int     `json:"ipCooldownSeconds,omitempty"`
}

// Key is the key an IPAM object is written to, from its spec;
// its name must be the one the key stands for.
func Key(r v3.Resource) (string, error) {
	var key, name string
	switch o := r.(type) {
	case *v3.IPAMConfiguration:
		key, name = ConfigKey, ConfigName
	case *v3.IPAMHandle:
		if o.Spec.HandleID == "" || bytes.ContainsRune([]byte(o.Spec.HandleID), '/') {
			return "", fmt.Errorf("%w: spec.handleID %q cannot be an etcd key segment", ErrBadName, o.Spec.HandleID)
		}
		key, name = HandlePrefix+o.Spec.HandleID, o.Spec.HandleID
	case *v3.IPAMBlock:
		p, err := ParseStrictCIDR(o.Spec.CIDR)
		if err != nil {
			return "", fmt.Errorf("%w: spec.cidr: %v", ErrBadName, err)
		}
		key, name = BlockKey(p), BlockName(p)
	case *v3.BlockAffinity:
		p, err := ParseStrictCIDR(o.Spec.CIDR)
		if err != nil {
			return "", fmt.Errorf("%w: spec.cidr: %v", ErrBadName, err)
		}
		if o.Spec.Node == "" || bytes.ContainsRune([]byte(o.Spec.Node), '/') {
			return "", fmt.Errorf("%w: spec.node %q cannot be an etcd key segment", ErrBadName, o.Spec.Node)
		}
		typ := o.Spec.Type
		if typ == "" {
			typ = AffinityTypeHost
		}
		if typ != AffinityTypeHost && typ != AffinityTypeVirtual {
			return "", fmt.Errorf("%w: spec.type %q is not host or virtual", ErrBadName, typ)
		}
		key, name = AffinityKey(typ, o.Spec.Node, p), AffinityName(o.Spec.Node, p)
	default:
		return "", fmt.Errorf("%s is not an IPAM kind", v3.KindOf(r))
	}
	if r.GetName() != name {
		return "", fmt.Errorf("%w: the name of this %s must be %q (its key is %s)", ErrBadName, v3.KindOf(r), name, key)
	}
	return key, nil
}

var ErrBadName = errors.New("name does not match the object")

// Encode renders an IPAM object's spec as Calico's model JSON (the format
// has no metadata: see the package comment).
func Encode(r v3.Resource) ([]byte, error) {
	switch o := r.(type) {
	case *v3.IPAMConfiguration:
		s := o.Spec
		mc := Config{
			StrictAffinity:     s.StrictAffinity,
			AutoAllocateBlocks: s.AutoAllocateBlocks == nil || *s.AutoAllocateBlocks,
			MaxBlocksPerHost:   int(s.MaxBlocksPerHost),
			IPCooldownSeconds:  int(s.IPCooldownSeconds),
		}
		if s.KubeVirtVMAddressPersistence != nil {
			v := string(*s.KubeVirtVMAddressPersistence)
			mc.KubeVirtVMAddressPersistence = &v
		}
		return json.Marshal(mc)
	case *v3.IPAMHandle:
		return json.Marshal(Handle{Block: o.Spec.Block, Deleted: o.Spec.Deleted})
	case *v3.BlockAffinity:
		return json.Marshal(Affinity{State: string(o.Spec.State), Deleted: o.Spec.Deleted})
	case *v3.IPAMBlock:
		s := o.Spec
		mb := Block{
			CIDR:                        s.CIDR,
			Affinity:                    s.Affinity,
			AffinityClaimTime:           s.AffinityClaimTime,
			Allocations:                 s.Allocations,
			Unallocated:                 s.Unallocated,
			Attributes:                  make([]Attribute, len(s.Attributes)),
			SequenceNumber:              s.SequenceNumber,
			SequenceNumberForAllocation: s.SequenceNumberForAllocation,
			Deleted:                     s.Deleted,
			StrictAffinity:              s.DeprecatedStrictAffinity,
		}
		if mb.Allocations == nil {
			mb.Allocations = []*int{}
		}
		if mb.Unallocated == nil {
			mb.Unallocated = []int{}
		}
		for i, a := range s.Attributes {
			mb.Attributes[i] = Attribute{HandleID: a.HandleID, ActiveOwnerAttrs: a.ActiveOwnerAttrs, AlternateOwnerAttrs: a.AlternateOwnerAttrs}
		}
		return json.Marshal(mb)
	}
	return nil, fmt.Errorf("%s is not an IPAM kind", v3.KindOf(r))
}

// strictUnmarshal decodes val into v refusing unknown fields (a field
// Tabby does not know would be lost when the record is written back).
func strictUnmarshal(val []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(val))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// Decode builds the v3 object of the IPAM record at key k with value
// val (metadata other than name and uid is left to the caller).
func Decode(info v3.KindInfo, k ParsedKey, val []byte) (v3.Resource, error) {
	obj := info.New()
	obj.SetName(k.Name)
	switch o := obj.(type) {
	case *v3.IPAMConfiguration:
		var mc Config
		if err := strictUnmarshal(val, &mc); err != nil {
			return nil, err
		}
		auto := mc.AutoAllocateBlocks
		o.Spec = v3.IPAMConfigurationSpec{
			StrictAffinity: mc.StrictAffinity, AutoAllocateBlocks: &auto,
			MaxBlocksPerHost: int32(mc.MaxBlocksPerHost), IPCooldownSeconds: int32(mc.IPCooldownSeconds),
		}
		if mc.KubeVirtVMAddressPersistence != nil {
			v := v3.VMAddressPersistence(*mc.KubeVirtVMAddressPersistence)
			o.Spec.KubeVirtVMAddressPersistence = &v
		}
	case *v3.IPAMHandle:
		var mh Handle
		if err := strictUnmarshal(val, &mh); err != nil {
			return nil, err
		}
		o.Spec = v3.IPAMHandleSpec{HandleID: k.ID, Block: mh.Block, Deleted: mh.Deleted}
	case *v3.BlockAffinity:
		if len(bytes.TrimSpace(val)) == 0 {
			val = []byte("{}") // very old Calico stored affinities without a value
		}
		var ma Affinity
		if err := strictUnmarshal(val, &ma); err != nil {
			return nil, err
		}
		o.Spec = v3.BlockAffinitySpec{
			State: v3.BlockAffinityState(ma.State), Node: k.Node, Type: k.Type,
			CIDR: k.CIDR.String(), Deleted: ma.Deleted,
		}
	case *v3.IPAMBlock:
		var mb Block
		if err := strictUnmarshal(val, &mb); err != nil {
			return nil, err
		}
		if mb.CIDR != k.CIDR.String() {
			return nil, fmt.Errorf("cidr %q does not match the key's %s", mb.CIDR, k.CIDR)
		}
		aff := mb.Affinity
		if aff == nil && mb.HostAffinity != nil {
			a := AffinityTypeHost + ":" + *mb.HostAffinity // the deprecated form
			aff = &a
		}
		o.Spec = v3.IPAMBlockSpec{
			CIDR: mb.CIDR, Affinity: aff, AffinityClaimTime: mb.AffinityClaimTime,
			Allocations: mb.Allocations, Unallocated: mb.Unallocated,
			SequenceNumber: mb.SequenceNumber, SequenceNumberForAllocation: mb.SequenceNumberForAllocation,
			Deleted: mb.Deleted, DeprecatedStrictAffinity: mb.StrictAffinity,
		}
		o.Spec.Attributes = make([]v3.AllocationAttribute, len(mb.Attributes))
		for i, a := range mb.Attributes {
			if a.ReleasedAt != nil {
				return nil, fmt.Errorf("attributes[%d].releasedAt (an address in IP cooldown) is not supported by Tabby", i)
			}
			o.Spec.Attributes[i] = v3.AllocationAttribute{HandleID: a.HandleID, ActiveOwnerAttrs: a.ActiveOwnerAttrs, AlternateOwnerAttrs: a.AlternateOwnerAttrs}
		}
	default:
		return nil, fmt.Errorf("%s is not an IPAM kind", info.Kind)
	}
	return obj, nil
}
