package etcd

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// Calico's etcd layout of the IPAM kinds (libcalico-go's backend model),
// which Tabby reads and writes unchanged so that a Calico cluster's
// allocations are Tabby's and the other way round:
//
//	IPAMBlock          /calico/ipam/v2/assignment/ipv<4|6>/block/<addr>-<len>
//	BlockAffinity      /calico/ipam/v2/<host|virtual>/<node>/ipv<4|6>/block/<addr>-<len>
//	IPAMHandle         /calico/ipam/v2/handle/<handle ID>
//	IPAMConfiguration  /calico/ipam/v2/config
//
// <addr> is the block's address in Go's canonical form (netip), so
// fd00::1:0/122 is fd00::1:0-122. The v3 names are the ones Tabby's ipam
// package (and Calico's Kubernetes backend) uses: a block is its CIDR with
// '.', ':' and '/' as '-' (10-1-54-64-26), an affinity is
// <node>-<block name>, a handle its ID, the configuration "default".
const (
	ipamBlockPrefix     = ipamPrefix + "assignment/"
	ipamHandlePrefix    = ipamPrefix + "handle/"
	ipamConfigKey       = ipamPrefix + "config"
	ipamConfigName      = "default"
	affinityTypeHost    = "host"
	affinityTypeVirtual = "virtual"
)

// affinityTypes are the folders under ipamPrefix holding affinities.
var affinityTypes = []string{affinityTypeHost, affinityTypeVirtual}

// isIPAMModelKind reports the kinds stored in Calico's model format.
func isIPAMModelKind(kind string) bool {
	switch kind {
	case v3.KindIPAMBlock, v3.KindBlockAffinity, v3.KindIPAMHandle, v3.KindIPAMConfiguration:
		return true
	}
	return false
}

var ipamNameReplacer = strings.NewReplacer(".", "-", ":", "-", "/", "-")

// blockName is the v3 name of the block with CIDR p: 10.1.54.64/26 ->
// 10-1-54-64-26 (as ipam.BlockName).
func blockName(p netip.Prefix) string { return ipamNameReplacer.Replace(p.String()) }

// blockKeySegment is the last segment of a block's etcd key: the CIDR with
// its '/' as '-'.
func blockKeySegment(p netip.Prefix) string {
	return p.Addr().String() + "-" + strconv.Itoa(p.Bits())
}

func ipVersion(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 4
	}
	return 6
}

// blockEtcdKey is the key of the block with CIDR p.
func blockEtcdKey(p netip.Prefix) string {
	return fmt.Sprintf("%sipv%d/block/%s", ipamBlockPrefix, ipVersion(p), blockKeySegment(p))
}

// affinityEtcdKey is the key of node's affinity to the block p.
func affinityEtcdKey(typ, node string, p netip.Prefix) string {
	return fmt.Sprintf("%s%s/%s/ipv%d/block/%s", ipamPrefix, typ, node, ipVersion(p), blockKeySegment(p))
}

// parseStrictCIDR parses a masked CIDR in canonical form (no IPv4-mapped
// IPv6 addresses, which have no unambiguous name).
func parseStrictCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not a plain IPv4 or IPv6 CIDR", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set", s)
	}
	return p, nil
}

// parseBlockKeySegment reads <addr>-<len> of a block or affinity key.
func parseBlockKeySegment(seg string) (netip.Prefix, error) {
	i := strings.LastIndexByte(seg, '-')
	if i < 0 {
		return netip.Prefix{}, fmt.Errorf("%q is not <address>-<prefix length>", seg)
	}
	p, err := parseStrictCIDR(seg[:i] + "/" + seg[i+1:])
	if err != nil {
		return netip.Prefix{}, err
	}
	if blockKeySegment(p) != seg {
		return netip.Prefix{}, fmt.Errorf("%q is not in canonical form (want %s)", seg, blockKeySegment(p))
	}
	return p, nil
}

// parseBlockName reads a block's v3 name back into its CIDR: four dashes
// between decimal fields are IPv4, anything else IPv6 with every dash but
// the last a colon. Names that do not round-trip are refused.
func parseBlockName(name string) (netip.Prefix, error) {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return netip.Prefix{}, fmt.Errorf("%q is not a block name (like 10-1-54-64-26)", name)
	}
	addr, bits := name[:i], name[i+1:]
	var s string
	if f := strings.Split(addr, "-"); len(f) == 4 && allDecimal(f) {
		s = strings.Join(f, ".") + "/" + bits
	} else {
		s = strings.ReplaceAll(addr, "-", ":") + "/" + bits
	}
	p, err := parseStrictCIDR(s)
	if err != nil || blockName(p) != name {
		return netip.Prefix{}, fmt.Errorf("%q is not a block name (like 10-1-54-64-26)", name)
	}
	return p, nil
}

func allDecimal(fields []string) bool {
	for _, f := range fields {
		if f == "" || strings.Trim(f, "0123456789") != "" {
			return false
		}
	}
	return true
}

// affinityName is the v3 name of node's affinity to block p (as
// ipam.AffinityName).
func affinityName(node string, p netip.Prefix) string { return node + "-" + blockName(p) }

// affinityKeyCandidates are the etcd keys an affinity's v3 name may stand
// for: the name does not say where the node's name ends nor the affinity
// type, so every split whose tail is a block name, in both type folders.
func affinityKeyCandidates(name string) []string {
	var out []string
	for i := 1; i < len(name); i++ {
		if name[i] != '-' {
			continue
		}
		p, err := parseBlockName(name[i+1:])
		if err != nil {
			continue
		}
		for _, typ := range affinityTypes {
			out = append(out, affinityEtcdKey(typ, name[:i], p))
		}
	}
	return out
}

// parsedIPAMKey is what an etcd key of an IPAM kind says.
type parsedIPAMKey struct {
	name string
	cidr netip.Prefix // blocks and affinities
	node string       // affinities
	typ  string       // affinities: host or virtual
	id   string       // handles
}

// parseIPAMKey reads an etcd key of kind; ok is false when the key is not
// in the kind's folders at all, err set when it is but does not parse.
func parseIPAMKey(kind, ekey string) (k parsedIPAMKey, ok bool, err error) {
	switch kind {
	case v3.KindIPAMConfiguration:
		return parsedIPAMKey{name: ipamConfigName}, ekey == ipamConfigKey, nil
	case v3.KindIPAMHandle:
		id, found := strings.CutPrefix(ekey, ipamHandlePrefix)
		if !found {
			return k, false, nil
		}
		if id == "" || strings.Contains(id, "/") {
			return k, true, fmt.Errorf("%q is not %s<handle ID>", ekey, ipamHandlePrefix)
		}
		return parsedIPAMKey{name: id, id: id}, true, nil
	case v3.KindIPAMBlock:
		rest, found := strings.CutPrefix(ekey, ipamBlockPrefix)
		if !found {
			return k, false, nil
		}
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[1] != "block" {
			return k, true, fmt.Errorf("%q is not %sipv<4|6>/block/<cidr>", ekey, ipamBlockPrefix)
		}
		p, err := parseBlockKeySegment(parts[2])
		if err != nil {
			return k, true, fmt.Errorf("block key %q: %w", ekey, err)
		}
		if parts[0] != fmt.Sprintf("ipv%d", ipVersion(p)) {
			return k, true, fmt.Errorf("block key %q: %s is not under %s", ekey, p, parts[0])
		}
		return parsedIPAMKey{name: blockName(p), cidr: p}, true, nil
	case v3.KindBlockAffinity:
		for _, typ := range affinityTypes {
			rest, found := strings.CutPrefix(ekey, ipamPrefix+typ+"/")
			if !found {
				continue
			}
			parts := strings.Split(rest, "/")
			if len(parts) != 4 || parts[0] == "" || parts[2] != "block" {
				return k, true, fmt.Errorf("%q is not %s%s/<node>/ipv<4|6>/block/<cidr>", ekey, ipamPrefix, typ)
			}
			p, err := parseBlockKeySegment(parts[3])
			if err != nil {
				return k, true, fmt.Errorf("block affinity key %q: %w", ekey, err)
			}
			if parts[1] != fmt.Sprintf("ipv%d", ipVersion(p)) {
				return k, true, fmt.Errorf("block affinity key %q: %s is not under %s", ekey, p, parts[1])
			}
			return parsedIPAMKey{name: affinityName(parts[0], p), cidr: p, node: parts[0], typ: typ}, true, nil
		}
		return k, false, nil
	}
	return k, false, nil
}

// ipamListRanges are the key ranges holding every object of kind whose
// name starts with namePrefix: [key, end) pairs, end nil for one key.
func ipamListRanges(kind, namePrefix string) [][2]string {
	switch kind {
	case v3.KindIPAMConfiguration:
		return [][2]string{{ipamConfigKey, ""}}
	case v3.KindIPAMHandle:
		p := ipamHandlePrefix + namePrefix
		return [][2]string{{p, string(kvpb.PrefixEnd(p))}}
	case v3.KindIPAMBlock:
		return [][2]string{{ipamBlockPrefix, string(kvpb.PrefixEnd(ipamBlockPrefix))}}
	case v3.KindBlockAffinity:
		// A name <node>-<block> starting with namePrefix has a node name
		// starting with namePrefix up to its first dash (node names are
		// not empty): that narrows the range; names are filtered after.
		nodePrefix, _, _ := strings.Cut(namePrefix, "-")
		var out [][2]string
		for _, typ := range affinityTypes {
			p := ipamPrefix + typ + "/" + nodePrefix
			out = append(out, [2]string{p, string(kvpb.PrefixEnd(p))})
		}
		return out
	}
	return nil
}

// ipamWatchPrefix is the one prefix a watch of kind covers (events of
// keys parseIPAMKey does not own are dropped).
func ipamWatchPrefix(kind string) string {
	switch kind {
	case v3.KindIPAMConfiguration:
		return ipamConfigKey
	case v3.KindIPAMHandle:
		return ipamHandlePrefix
	case v3.KindIPAMBlock:
		return ipamBlockPrefix
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
		if name != ipamConfigName {
			return nil, fmt.Errorf("the IPAMConfiguration is named %q, not %q", ipamConfigName, name)
		}
		return []string{ipamConfigKey}, nil
	case v3.KindIPAMHandle:
		return []string{ipamHandlePrefix + name}, nil
	case v3.KindIPAMBlock:
		p, err := parseBlockName(name)
		if err != nil {
			return nil, err
		}
		return []string{blockEtcdKey(p)}, nil
	case v3.KindBlockAffinity:
		keys := affinityKeyCandidates(name)
		if len(keys) == 0 {
			return nil, fmt.Errorf("%q is not a block affinity name (<node>-<block name>)", name)
		}
		return keys, nil
	}
	return nil, fmt.Errorf("%s is not an IPAM kind", kind)
}
