package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
	"github.com/tabbynet/tabby/ipam"
)

// migrateIPAM is the IPAM section of `calicoctl datastore migrate export`:
// Calico's backend key/value pairs (etcd key paths, libcalico-go model
// values, both as package ipamformat defines them for the etcd backend) as
// JSON, which `migrate import` turns back into the IPAM resources of the
// Kubernetes datastore.
type migrateIPAM struct {
	BlockAffinities []kvPair `json:"block_affinities,omitempty"`
	IPAMBlocks      []kvPair `json:"blocks,omitempty"`
	IPAMHandles     []kvPair `json:"handles,omitempty"`
	IPAMConfig      *kvPair  `json:"config,omitempty"`
}

// kvPair is libcalico-go's KVPair as Calico's migrate export writes it;
// Value is the record's model JSON (ipamformat).
type kvPair struct {
	Key   string
	Value json.RawMessage
	TTL   time.Duration
}

// encodedPair is the pair for r at key.
func encodedPair(key string, r v3.Resource) (kvPair, error) {
	val, err := ipamformat.Encode(r)
	if err != nil {
		return kvPair{}, fmt.Errorf("%s %s: %w", v3.KindOf(r), r.GetName(), err)
	}
	return kvPair{Key: key, Value: val}, nil
}

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
		b := r.(*v3.IPAMBlock).DeepCopy()
		p, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			return nil, fmt.Errorf("IPAM block %s: %w", r.GetName(), err)
		}
		if aff := b.Spec.Affinity; aff != nil && strings.HasPrefix(*aff, "host:") {
			renamed := "host:" + rename(strings.TrimPrefix(*aff, "host:"))
			b.Spec.Affinity = &renamed
		}
		for i, at := range b.Spec.Attributes {
			at.ActiveOwnerAttrs = renamedNode(at.ActiveOwnerAttrs, rename)
			at.AlternateOwnerAttrs = renamedNode(at.AlternateOwnerAttrs, rename)
			if at.HandleID != nil {
				h := renamedHandle(*at.HandleID, rename)
				at.HandleID = &h
			}
			b.Spec.Attributes[i] = at
		}
		kv, err := encodedPair(ipamformat.BlockKey(p), b)
		if err != nil {
			return nil, err
		}
		out.IPAMBlocks = append(out.IPAMBlocks, kv)
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
			typ = ipamformat.AffinityTypeHost
		}
		kv, err := encodedPair(ipamformat.AffinityKey(typ, rename(s.Node), p), r)
		if err != nil {
			return nil, err
		}
		out.BlockAffinities = append(out.BlockAffinities, kv)
	}
	handles, err := list(v3.KindIPAMHandle)
	if err != nil {
		return nil, err
	}
	for _, r := range handles {
		kv, err := encodedPair(ipamformat.HandlePrefix+renamedHandle(r.(*v3.IPAMHandle).Spec.HandleID, rename), r)
		if err != nil {
			return nil, err
		}
		out.IPAMHandles = append(out.IPAMHandles, kv)
	}
	cr, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"})
	switch {
	case err == nil:
		kv, err := encodedPair(ipamformat.ConfigKey, cr)
		if err != nil {
			return nil, err
		}
		out.IPAMConfig = &kv
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
// to create, reading each pair as the etcd backend reads its records
// (ipamformat); a key or value it cannot read is refused, never skipped.
func (m *migrateIPAM) ipamResources() ([]v3.Resource, error) {
	var out []v3.Resource
	add := func(kind string, kv kvPair) error {
		info, _ := v3.LookupKind(kind)
		pk, ok, err := ipamformat.ParseKey(kind, kv.Key)
		if err == nil && !ok {
			err = errors.New("not where Calico keeps them")
		}
		if err == nil && len(kv.Value) == 0 {
			err = errors.New("no value")
		}
		var r v3.Resource
		if err == nil {
			r, err = ipamformat.Decode(info, pk, kv.Value)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, kv.Key, err)
		}
		out = append(out, r)
		return nil
	}
	for _, group := range []struct {
		kind string
		kvs  []kvPair
	}{{v3.KindIPAMBlock, m.IPAMBlocks}, {v3.KindBlockAffinity, m.BlockAffinities}, {v3.KindIPAMHandle, m.IPAMHandles}} {
		for _, kv := range group.kvs {
			if err := add(group.kind, kv); err != nil {
				return nil, err
			}
		}
	}
	if m.IPAMConfig != nil {
		if err := add(v3.KindIPAMConfiguration, *m.IPAMConfig); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (m *migrateIPAM) marshal() ([]byte, error) { return json.MarshalIndent(m, "", "  ") }
