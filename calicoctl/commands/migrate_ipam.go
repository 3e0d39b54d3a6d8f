package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// migrateIPAM is the IPAM section of `calicoctl datastore migrate export`:
// Calico's backend key/value pairs (etcd key paths, libcalico-go model
// values) as JSON, which `migrate import` turns back into the IPAM
// resources of the Kubernetes datastore.
type migrateIPAM struct {
	BlockAffinities []kvPair[modelAffinity] `json:"block_affinities,omitempty"`
	IPAMBlocks      []kvPair[modelBlock]    `json:"blocks,omitempty"`
	IPAMHandles     []kvPair[modelHandle]   `json:"handles,omitempty"`
	IPAMConfig      *kvPair[modelConfig]    `json:"config,omitempty"`
}

// kvPair is libcalico-go's KVPair as Calico's migrate export writes it.
type kvPair[T any] struct {
	Key   string
	Value *T
	TTL   time.Duration
}

// The model types: libcalico-go's JSON for each IPAM record.
type modelBlock struct {
	CIDR                        string            `json:"cidr"`
	Affinity                    *string           `json:"affinity"`
	AffinityClaimTime           *metav1.Time      `json:"affinity_claim_time,omitempty"`
	Allocations                 []*int            `json:"allocations"`
	Unallocated                 []int             `json:"unallocated"`
	Attributes                  []modelAttribute  `json:"attributes"`
	Deleted                     bool              `json:"deleted"`
	SequenceNumber              uint64            `json:"sequenceNumber"`
	SequenceNumberForAllocation map[string]uint64 `json:"sequenceNumberForAllocation"`
	// Older Calico's forms: the affinity's host alone, and a block-level
	// strictAffinity (always false).
	HostAffinity   *string `json:"hostAffinity,omitempty"`
	StrictAffinity bool    `json:"strictAffinity,omitempty"`
}

type modelAttribute struct {
	HandleID            *string           `json:"handle_id,omitempty"`
	ActiveOwnerAttrs    map[string]string `json:"secondary,omitempty"`
	AlternateOwnerAttrs map[string]string `json:"alternateOwnerAttrs,omitempty"`
}

type modelAffinity struct {
	State   string `json:"state"`
	Deleted bool   `json:"deleted"`
}

type modelHandle struct {
	HandleID string         `json:"-"`
	Block    map[string]int `json:"block"`
	Deleted  bool           `json:"deleted"`
}

type modelConfig struct {
	StrictAffinity               bool    `json:"strict_affinity,omitempty"`
	AutoAllocateBlocks           bool    `json:"auto_allocate_blocks,omitempty"`
	MaxBlocksPerHost             int     `json:"maxBlocksPerHost,omitempty"`
	KubeVirtVMAddressPersistence *string `json:"kubeVirtVMAddressPersistence,omitempty"`
	IPCooldownSeconds            int     `json:"ipCooldownSeconds,omitempty"`
}

const ipamKeyPrefix = "/calico/ipam/v2/"

func ipv(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "ipv4"
	}
	return "ipv6"
}

func blockSegment(p netip.Prefix) string { return p.Addr().String() + "-" + strconv.Itoa(p.Bits()) }

// pullIPAM reads every IPAM record, renaming nodes as nodeMap says (etcd
// node name -> Kubernetes node name), as Calico's export does.
func pullIPAM(ctx context.Context, c datastore.Client, nodeMap map[string]string) (*migrateIPAM, error) {
	rename := func(n string) string {
		if k, ok := nodeMap[n]; ok {
			return k
		}
		return n
	}
	out := &migrateIPAM{}
	list := func(kind string) ([]v3.Resource, error) {
		l, err := c.List(ctx, kind, datastore.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind, friendly(err))
		}
		if err := l.Complete(); err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind, friendly(err))
		}
		return l.Items, nil
	}
	blocks, err := list(v3.KindIPAMBlock)
	if err != nil {
		return nil, err
	}
	for _, r := range blocks {
		s := r.(*v3.IPAMBlock).Spec
		p, err := netip.ParsePrefix(s.CIDR)
		if err != nil {
			return nil, fmt.Errorf("IPAM block %s: %w", r.GetName(), err)
		}
		mb := modelBlock{CIDR: s.CIDR, Affinity: s.Affinity, AffinityClaimTime: s.AffinityClaimTime, Allocations: s.Allocations,
			Unallocated: s.Unallocated, Deleted: s.Deleted, SequenceNumber: s.SequenceNumber, SequenceNumberForAllocation: s.SequenceNumberForAllocation,
			Attributes: make([]modelAttribute, len(s.Attributes)), StrictAffinity: s.DeprecatedStrictAffinity}
		if mb.Allocations == nil {
			mb.Allocations = []*int{}
		}
		if mb.Unallocated == nil {
			mb.Unallocated = []int{}
		}
		if mb.Affinity != nil && strings.HasPrefix(*mb.Affinity, "host:") {
			aff := "host:" + rename(strings.TrimPrefix(*mb.Affinity, "host:"))
			mb.Affinity = &aff
		}
		for i, a := range s.Attributes {
			ma := modelAttribute{HandleID: a.HandleID, ActiveOwnerAttrs: renamedNode(a.ActiveOwnerAttrs, rename), AlternateOwnerAttrs: renamedNode(a.AlternateOwnerAttrs, rename)}
			if ma.HandleID != nil {
				h := renamedHandle(*ma.HandleID, rename)
				ma.HandleID = &h
			}
			mb.Attributes[i] = ma
		}
		out.IPAMBlocks = append(out.IPAMBlocks, kvPair[modelBlock]{Key: ipamKeyPrefix + "assignment/" + ipv(p) + "/block/" + blockSegment(p), Value: &mb})
	}
	affs, err := list(v3.KindBlockAffinity)
	if err != nil {
		return nil, err
	}
	for _, r := range affs {
		s := r.(*v3.BlockAffinity).Spec
		p, err := netip.ParsePrefix(s.CIDR)
		if err != nil {
			return nil, fmt.Errorf("block affinity %s: %w", r.GetName(), err)
		}
		typ := s.Type
		if typ == "" {
			typ = "host"
		}
		out.BlockAffinities = append(out.BlockAffinities, kvPair[modelAffinity]{
			Key:   ipamKeyPrefix + typ + "/" + rename(s.Node) + "/" + ipv(p) + "/block/" + blockSegment(p),
			Value: &modelAffinity{State: string(s.State), Deleted: s.Deleted}})
	}
	handles, err := list(v3.KindIPAMHandle)
	if err != nil {
		return nil, err
	}
	for _, r := range handles {
		s := r.(*v3.IPAMHandle).Spec
		out.IPAMHandles = append(out.IPAMHandles, kvPair[modelHandle]{Key: ipamKeyPrefix + "handle/" + renamedHandle(s.HandleID, rename), Value: &modelHandle{Block: s.Block, Deleted: s.Deleted}})
	}
	cr, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"})
	switch {
	case err == nil:
		s := cr.(*v3.IPAMConfiguration).Spec
		mc := &modelConfig{StrictAffinity: s.StrictAffinity, AutoAllocateBlocks: s.AutoAllocateBlocks == nil || *s.AutoAllocateBlocks,
			MaxBlocksPerHost: int(s.MaxBlocksPerHost), IPCooldownSeconds: int(s.IPCooldownSeconds)}
		if s.KubeVirtVMAddressPersistence != nil {
			v := string(*s.KubeVirtVMAddressPersistence)
			mc.KubeVirtVMAddressPersistence = &v
		}
		out.IPAMConfig = &kvPair[modelConfig]{Key: ipamKeyPrefix + "config", Value: mc}
	case !isNotFound(err):
		return nil, fmt.Errorf("reading IPAMConfiguration: %w", friendly(err))
	}
	return out, nil
}

// renamedHandle renames the node in a node's tunnel-address handle, as
// the blocks' attributes are renamed.
func renamedHandle(h string, rename func(string) string) string {
	for _, pre := range []string{"ipip-tunnel-addr-", "vxlan-tunnel-addr-", "wireguard-tunnel-addr-"} {
		if n, ok := strings.CutPrefix(h, pre); ok {
			return pre + rename(n)
		}
	}
	return h
}

func renamedNode(attrs map[string]string, rename func(string) string) map[string]string {
	if attrs == nil {
		return nil
	}
	out := make(map[string]string, len(attrs))
	for k, v := range attrs {
		out[k] = v
	}
	if n, ok := out[ipam.AttrNode]; ok {
		out[ipam.AttrNode] = rename(n)
	}
	return out
}

// ipamResources turns an export's IPAM section into the IPAM resources
// to create, refusing a key it cannot read rather than skipping it.
func (m *migrateIPAM) ipamResources() ([]v3.Resource, error) {
	var out []v3.Resource
	newOf := func(kind string) v3.Resource {
		info, _ := v3.LookupKind(kind)
		return info.New()
	}
	for _, kv := range m.IPAMBlocks {
		if kv.Value == nil {
			return nil, fmt.Errorf("block %s has no value", kv.Key)
		}
		p, err := netip.ParsePrefix(kv.Value.CIDR)
		if err != nil {
			return nil, fmt.Errorf("block %s: %w", kv.Key, err)
		}
		b := newOf(v3.KindIPAMBlock).(*v3.IPAMBlock)
		b.Name = ipam.BlockName(p)
		v := kv.Value
		b.Spec = v3.IPAMBlockSpec{CIDR: v.CIDR, Affinity: v.Affinity, AffinityClaimTime: v.AffinityClaimTime, Allocations: v.Allocations,
			Unallocated: v.Unallocated, Deleted: v.Deleted, SequenceNumber: v.SequenceNumber, SequenceNumberForAllocation: v.SequenceNumberForAllocation,
			DeprecatedStrictAffinity: v.StrictAffinity}
		if b.Spec.Affinity == nil && v.HostAffinity != nil {
			aff := "host:" + *v.HostAffinity
			b.Spec.Affinity = &aff
		}
		for _, a := range v.Attributes {
			b.Spec.Attributes = append(b.Spec.Attributes, v3.AllocationAttribute{HandleID: a.HandleID, ActiveOwnerAttrs: a.ActiveOwnerAttrs, AlternateOwnerAttrs: a.AlternateOwnerAttrs})
		}
		out = append(out, b)
	}
	for _, kv := range m.BlockAffinities {
		// /calico/ipam/v2/<type>/<node>/ipv4/block/<addr>-<bits>
		parts := strings.Split(strings.TrimPrefix(kv.Key, ipamKeyPrefix), "/")
		if len(parts) != 5 || parts[3] != "block" || kv.Value == nil {
			return nil, fmt.Errorf("block affinity key %q is not /calico/ipam/v2/<type>/<node>/ipvN/block/<cidr>", kv.Key)
		}
		addr, bits, ok := strings.Cut(parts[4], "-")
		n, err := strconv.Atoi(bits)
		ip, perr := netip.ParseAddr(addr)
		if !ok || err != nil || perr != nil {
			return nil, fmt.Errorf("block affinity key %q: bad block %q", kv.Key, parts[4])
		}
		p := netip.PrefixFrom(ip, n)
		ba := newOf(v3.KindBlockAffinity).(*v3.BlockAffinity)
		ba.Name = ipam.AffinityName(parts[1], p)
		ba.Spec = v3.BlockAffinitySpec{State: v3.BlockAffinityState(kv.Value.State), Node: parts[1], Type: parts[0], CIDR: p.String(), Deleted: kv.Value.Deleted}
		out = append(out, ba)
	}
	for _, kv := range m.IPAMHandles {
		id, ok := strings.CutPrefix(kv.Key, ipamKeyPrefix+"handle/")
		if !ok || id == "" || kv.Value == nil {
			return nil, fmt.Errorf("handle key %q is not /calico/ipam/v2/handle/<id>", kv.Key)
		}
		h := newOf(v3.KindIPAMHandle).(*v3.IPAMHandle)
		h.Name = ipam.HandleName(id)
		h.Spec = v3.IPAMHandleSpec{HandleID: id, Block: kv.Value.Block, Deleted: kv.Value.Deleted}
		out = append(out, h)
	}
	if kv := m.IPAMConfig; kv != nil && kv.Value != nil {
		cfg := newOf(v3.KindIPAMConfiguration).(*v3.IPAMConfiguration)
		cfg.Name = "default"
		auto := kv.Value.AutoAllocateBlocks
		cfg.Spec = v3.IPAMConfigurationSpec{StrictAffinity: kv.Value.StrictAffinity, AutoAllocateBlocks: &auto,
			MaxBlocksPerHost: int32(kv.Value.MaxBlocksPerHost), IPCooldownSeconds: int32(kv.Value.IPCooldownSeconds)}
		if p := kv.Value.KubeVirtVMAddressPersistence; p != nil {
			v := v3.VMAddressPersistence(*p)
			cfg.Spec.KubeVirtVMAddressPersistence = &v
		}
		out = append(out, cfg)
	}
	return out, nil
}

func (m *migrateIPAM) marshal() ([]byte, error) { return json.MarshalIndent(m, "", "  ") }
