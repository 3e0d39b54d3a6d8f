package etcd

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// The values of the IPAM kinds are libcalico-go's model structs as JSON,
// with no metadata. What the v3 objects carry beyond them:
//   - name: derived from the key (ipamkeys.go);
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

// modelBlock is Calico's AllocationBlock.
type modelBlock struct {
	CIDR                        string            `json:"cidr"`
	Affinity                    *string           `json:"affinity"`
	AffinityClaimTime           *metav1.Time      `json:"affinity_claim_time,omitempty"`
	Allocations                 []*int            `json:"allocations"`
	Unallocated                 []int             `json:"unallocated"`
	Attributes                  []modelAttribute  `json:"attributes"`
	SequenceNumber              uint64            `json:"sequenceNumber"`
	SequenceNumberForAllocation map[string]uint64 `json:"sequenceNumberForAllocation"`
	Deleted                     bool              `json:"deleted"`
	HostAffinity                *string           `json:"hostAffinity,omitempty"`
	StrictAffinity              bool              `json:"strictAffinity,omitempty"` // older Calico wrote it (always false)
}

// modelAttribute is Calico's AllocationAttribute.
type modelAttribute struct {
	HandleID            *string           `json:"handle_id,omitempty"`
	ActiveOwnerAttrs    map[string]string `json:"secondary,omitempty"`
	AlternateOwnerAttrs map[string]string `json:"alternateOwnerAttrs,omitempty"`
	ReleasedAt          *metav1.Time      `json:"releasedAt,omitempty"`
}

// modelAffinity is Calico's BlockAffinity.
type modelAffinity struct {
	State   string `json:"state"`
	Deleted bool   `json:"deleted"`
}

// modelHandle is Calico's IPAMHandle (its ID is the key).
type modelHandle struct {
	Block   map[string]int `json:"block"`
	Deleted bool           `json:"deleted"`
}

// modelConfig is Calico's IPAMConfig.
type modelConfig struct {
	StrictAffinity               bool    `json:"strict_affinity,omitempty"`
	AutoAllocateBlocks           bool    `json:"auto_allocate_blocks,omitempty"`
	MaxBlocksPerHost             int     `json:"maxBlocksPerHost,omitempty"`
	KubeVirtVMAddressPersistence *string `json:"kubeVirtVMAddressPersistence,omitempty"`
	IPCooldownSeconds            int     `json:"ipCooldownSeconds,omitempty"`
}

// errMetadataNotStored refuses a write whose metadata the model cannot hold.
var errMetadataNotStored = errors.New("is not stored in Calico's etcd IPAM format")

// ipamEtcdKey is the key an IPAM object is written to, from its spec;
// its name must be the one the key stands for.
func ipamEtcdKey(r v3.Resource) (string, error) {
	var key, name string
	switch o := r.(type) {
	case *v3.IPAMConfiguration:
		key, name = ipamConfigKey, ipamConfigName
	case *v3.IPAMHandle:
		if o.Spec.HandleID == "" || bytes.ContainsRune([]byte(o.Spec.HandleID), '/') {
			return "", fmt.Errorf("%w: spec.handleID %q cannot be an etcd key segment", errBadName, o.Spec.HandleID)
		}
		key, name = ipamHandlePrefix+o.Spec.HandleID, o.Spec.HandleID
	case *v3.IPAMBlock:
		p, err := parseStrictCIDR(o.Spec.CIDR)
		if err != nil {
			return "", fmt.Errorf("%w: spec.cidr: %v", errBadName, err)
		}
		key, name = blockEtcdKey(p), blockName(p)
	case *v3.BlockAffinity:
		p, err := parseStrictCIDR(o.Spec.CIDR)
		if err != nil {
			return "", fmt.Errorf("%w: spec.cidr: %v", errBadName, err)
		}
		if o.Spec.Node == "" || bytes.ContainsRune([]byte(o.Spec.Node), '/') {
			return "", fmt.Errorf("%w: spec.node %q cannot be an etcd key segment", errBadName, o.Spec.Node)
		}
		typ := o.Spec.Type
		if typ == "" {
			typ = affinityTypeHost
		}
		if typ != affinityTypeHost && typ != affinityTypeVirtual {
			return "", fmt.Errorf("%w: spec.type %q is not host or virtual", errBadName, typ)
		}
		key, name = affinityEtcdKey(typ, o.Spec.Node, p), affinityName(o.Spec.Node, p)
	default:
		return "", fmt.Errorf("%s is not an IPAM kind", v3.KindOf(r))
	}
	if r.GetName() != name {
		return "", fmt.Errorf("%w: the name of this %s must be %q (its key is %s)", errBadName, v3.KindOf(r), name, key)
	}
	return key, nil
}

var errBadName = errors.New("name does not match the object")

// encodeIPAM renders an IPAM object as Calico's model JSON.
func encodeIPAM(r v3.Resource) ([]byte, error) {
	m := r.(interface {
		GetLabels() map[string]string
		GetAnnotations() map[string]string
		GetFinalizers() []string
		GetOwnerReferences() []metav1.OwnerReference
	})
	switch {
	case len(m.GetLabels()) > 0:
		return nil, fmt.Errorf("metadata.labels %w", errMetadataNotStored)
	case len(m.GetAnnotations()) > 0:
		return nil, fmt.Errorf("metadata.annotations %w", errMetadataNotStored)
	case len(m.GetFinalizers()) > 0:
		return nil, fmt.Errorf("metadata.finalizers %w", errMetadataNotStored)
	case len(m.GetOwnerReferences()) > 0:
		return nil, fmt.Errorf("metadata.ownerReferences %w", errMetadataNotStored)
	}
	switch o := r.(type) {
	case *v3.IPAMConfiguration:
		s := o.Spec
		mc := modelConfig{
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
		return json.Marshal(modelHandle{Block: o.Spec.Block, Deleted: o.Spec.Deleted})
	case *v3.BlockAffinity:
		return json.Marshal(modelAffinity{State: string(o.Spec.State), Deleted: o.Spec.Deleted})
	case *v3.IPAMBlock:
		s := o.Spec
		mb := modelBlock{
			CIDR:                        s.CIDR,
			Affinity:                    s.Affinity,
			AffinityClaimTime:           s.AffinityClaimTime,
			Allocations:                 s.Allocations,
			Unallocated:                 s.Unallocated,
			Attributes:                  make([]modelAttribute, len(s.Attributes)),
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
			mb.Attributes[i] = modelAttribute{HandleID: a.HandleID, ActiveOwnerAttrs: a.ActiveOwnerAttrs, AlternateOwnerAttrs: a.AlternateOwnerAttrs}
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

// decodeIPAM builds the v3 object of the IPAM record at key k with value
// val (metadata other than name and uid is left to the caller).
func decodeIPAM(info v3.KindInfo, k parsedIPAMKey, val []byte) (v3.Resource, error) {
	obj := info.New()
	obj.SetName(k.name)
	switch o := obj.(type) {
	case *v3.IPAMConfiguration:
		var mc modelConfig
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
		var mh modelHandle
		if err := strictUnmarshal(val, &mh); err != nil {
			return nil, err
		}
		o.Spec = v3.IPAMHandleSpec{HandleID: k.id, Block: mh.Block, Deleted: mh.Deleted}
	case *v3.BlockAffinity:
		if len(bytes.TrimSpace(val)) == 0 {
			val = []byte("{}") // very old Calico stored affinities without a value
		}
		var ma modelAffinity
		if err := strictUnmarshal(val, &ma); err != nil {
			return nil, err
		}
		o.Spec = v3.BlockAffinitySpec{
			State: v3.BlockAffinityState(ma.State), Node: k.node, Type: k.typ,
			CIDR: k.cidr.String(), Deleted: ma.Deleted,
		}
	case *v3.IPAMBlock:
		var mb modelBlock
		if err := strictUnmarshal(val, &mb); err != nil {
			return nil, err
		}
		if mb.CIDR != k.cidr.String() {
			return nil, fmt.Errorf("cidr %q does not match the key's %s", mb.CIDR, k.cidr)
		}
		aff := mb.Affinity
		if aff == nil && mb.HostAffinity != nil {
			a := affinityTypeHost + ":" + *mb.HostAffinity // the deprecated form
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

// derivedUID is the uid of the record at key created at createRev.
func derivedUID(key string, createRev int64) types.UID {
	h := sha256.Sum256([]byte(key + "\x00" + strconv.FormatInt(createRev, 10)))
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}
