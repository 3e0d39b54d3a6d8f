package etcd

import (
	"fmt"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// The IPAM kinds are stored in Calico's etcd layout and model JSON,
// defined in package ipamformat; this file maps that layout onto etcd
// ranges and watches.

// ipamListRanges are the key ranges holding every object of kind (of one
// node's, for BlockAffinities with node set): [key, end) pairs, end ""
// for one key.
func ipamListRanges(kind, node string) [][2]string {
	switch kind {
	case v3.KindIPAMConfiguration:
		return [][2]string{{ipamformat.ConfigKey, ""}}
	case v3.KindIPAMHandle:
		p := ipamformat.HandlePrefix
		return [][2]string{{p, string(kvpb.PrefixEnd(p))}}
	case v3.KindIPAMBlock:
		return [][2]string{{ipamformat.BlockPrefix, string(kvpb.PrefixEnd(ipamformat.BlockPrefix))}}
	case v3.KindBlockAffinity:
		// <prefix><type>/<node>/ipv<n>/block/<cidr>
		var out [][2]string
		for _, typ := range ipamformat.AffinityTypes {
			p := ipamPrefix + typ + "/"
			if node != "" {
				p += node + "/"
			}
			out = append(out, [2]string{p, string(kvpb.PrefixEnd(p))})
		}
		return out
	}
	return nil
}

// ipamWatchPrefix is the one prefix a watch of kind covers (events of
// keys ipamformat.ParseKey does not own are dropped).
func ipamWatchPrefix(kind string) string {
	switch kind {
	case v3.KindIPAMConfiguration:
		return ipamformat.ConfigKey
	case v3.KindIPAMHandle:
		return ipamformat.HandlePrefix
	case v3.KindIPAMBlock:
		return ipamformat.BlockPrefix
	}
	// Affinities live in two folders (host/, virtual/) whose common
	// prefix is all of IPAM.
	return ipamPrefix
}

// ipamKeysForName are the etcd keys the v3 name of an IPAM object may
// stand for.
func ipamKeysForName(kind, name string) ([]string, error) {
	switch kind {
	case v3.KindIPAMConfiguration:
		if name != ipamformat.ConfigName {
			return nil, fmt.Errorf("the IPAMConfiguration is named %q, not %q", ipamformat.ConfigName, name)
		}
		return []string{ipamformat.ConfigKey}, nil
	case v3.KindIPAMHandle:
		return []string{ipamformat.HandlePrefix + name}, nil
	case v3.KindIPAMBlock:
		p, err := ipamformat.ParseBlockName(name)
		if err != nil {
			return nil, err
		}
		return []string{ipamformat.BlockKey(p)}, nil
	case v3.KindBlockAffinity:
		keys := ipamformat.AffinityKeyCandidates(name)
		if len(keys) == 0 {
			return nil, fmt.Errorf("%q is not a block affinity name (<node>-<block name>)", name)
		}
		return keys, nil
	}
	return nil, fmt.Errorf("%s is not an IPAM kind", kind)
}

// checkNode checks a list's restriction to a node (ListOptions.Node): only
// for BlockAffinities, and the node's name must be one key segment.
func checkNode(kind, node string) error {
	if err := datastore.CheckNode(kind, node); err != nil {
		return err
	}
	if strings.Contains(node, "/") {
		return fmt.Errorf("%w: node name %q contains '/'", datastore.ErrInvalid, node)
	}
	return nil
}

// ofNode narrows keep to the BlockAffinities of node (all objects when
// node is empty): the key range read already holds only the node's.
func ofNode(node string, keep func(v3.Resource) bool) func(v3.Resource) bool {
	if node == "" {
		return keep
	}
	return func(obj v3.Resource) bool {
		ba, ok := obj.(*v3.BlockAffinity)
		return ok && ba.Spec.Node == node && keep(obj)
	}
}
