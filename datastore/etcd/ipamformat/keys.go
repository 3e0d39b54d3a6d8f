package ipamformat

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
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
	// Prefix is the folder of every IPAM record.
	Prefix              = "/calico/ipam/v2/"
	BlockPrefix         = Prefix + "assignment/"
	HandlePrefix        = Prefix + "handle/"
	ConfigKey           = Prefix + "config"
	ConfigName          = "default"
	AffinityTypeHost    = "host"
	AffinityTypeVirtual = "virtual"
)

// AffinityTypes are the folders under Prefix holding affinities.
var AffinityTypes = []string{AffinityTypeHost, AffinityTypeVirtual}

// IsIPAMKind reports the kinds stored in Calico's model format.
func IsIPAMKind(kind string) bool {
	switch kind {
	case v3.KindIPAMBlock, v3.KindBlockAffinity, v3.KindIPAMHandle, v3.KindIPAMConfiguration:
		return true
	}
	return false
}

var ipamNameReplacer = strings.NewReplacer(".", "-", ":", "-", "/", "-")

// blockName is the v3 name of the block with CIDR p: 10.1.54.64/26 ->
// 10-1-54-64-26 (as ipam.BlockName).
func BlockName(p netip.Prefix) string { return ipamNameReplacer.Replace(p.String()) }

// BlockKeySegment is the last segment of a block's etcd key: the CIDR with
// its '/' as '-'.
func BlockKeySegment(p netip.Prefix) string {
	return p.Addr().String() + "-" + strconv.Itoa(p.Bits())
}

func IPVersion(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 4
	}
	return 6
}

// BlockKey is the key of the block with CIDR p.
func BlockKey(p netip.Prefix) string {
	return fmt.Sprintf("%sipv%d/block/%s", BlockPrefix, IPVersion(p), BlockKeySegment(p))
}

// AffinityKey is the key of node's affinity to the block p.
func AffinityKey(typ, node string, p netip.Prefix) string {
	return fmt.Sprintf("%s%s/%s/ipv%d/block/%s", Prefix, typ, node, IPVersion(p), BlockKeySegment(p))
}

// ParseStrictCIDR parses a masked CIDR in canonical form (no IPv4-mapped
// IPv6 addresses, which have no unambiguous name).
func ParseStrictCIDR(s string) (netip.Prefix, error) {
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

// ParseBlockKeySegment reads <addr>-<len> of a block or affinity key.
func ParseBlockKeySegment(seg string) (netip.Prefix, error) {
	i := strings.LastIndexByte(seg, '-')
	if i < 0 {
		return netip.Prefix{}, fmt.Errorf("%q is not <address>-<prefix length>", seg)
	}
	p, err := ParseStrictCIDR(seg[:i] + "/" + seg[i+1:])
	if err != nil {
		return netip.Prefix{}, err
	}
	if BlockKeySegment(p) != seg {
		return netip.Prefix{}, fmt.Errorf("%q is not in canonical form (want %s)", seg, BlockKeySegment(p))
	}
	return p, nil
}

// ParseBlockName reads a block's v3 name back into its CIDR: four dashes
// between decimal fields are IPv4, anything else IPv6 with every dash but
// the last a colon. Names that do not round-trip are refused.
func ParseBlockName(name string) (netip.Prefix, error) {
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
	p, err := ParseStrictCIDR(s)
	if err != nil || BlockName(p) != name {
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
func AffinityName(node string, p netip.Prefix) string { return node + "-" + BlockName(p) }

// AffinityKeyCandidates are the etcd keys an affinity's v3 name may stand
// for: the name does not say where the node's name ends nor the affinity
// type, so every split whose tail is a block name, in both type folders.
func AffinityKeyCandidates(name string) []string {
	var out []string
	for i := 1; i < len(name); i++ {
		if name[i] != '-' {
			continue
		}
		p, err := ParseBlockName(name[i+1:])
		if err != nil {
			continue
		}
		for _, typ := range AffinityTypes {
			out = append(out, AffinityKey(typ, name[:i], p))
		}
	}
	return out
}

// ParsedKey is what an etcd key of an IPAM kind says.
type ParsedKey struct {
	Name string       // the v3 name
	CIDR netip.Prefix // blocks and affinities
	Node string       // affinities
	Type string       // affinities: host or virtual
	ID   string       // handles
}

// ParseKey reads an etcd key of kind; ok is false when the key is not
// in the kind's folders at all, err set when it is but does not parse.
func ParseKey(kind, ekey string) (k ParsedKey, ok bool, err error) {
	switch kind {
	case v3.KindIPAMConfiguration:
		return ParsedKey{Name: ConfigName}, ekey == ConfigKey, nil
	case v3.KindIPAMHandle:
		id, found := strings.CutPrefix(ekey, HandlePrefix)
		if !found {
			return k, false, nil
		}
		if id == "" || strings.Contains(id, "/") {
			return k, true, fmt.Errorf("%q is not %s<handle ID>", ekey, HandlePrefix)
		}
		return ParsedKey{Name: id, ID: id}, true, nil
	case v3.KindIPAMBlock:
		rest, found := strings.CutPrefix(ekey, BlockPrefix)
		if !found {
			return k, false, nil
		}
		parts := strings.Split(rest, "/")
		if len(parts) != 3 || parts[1] != "block" {
			return k, true, fmt.Errorf("%q is not %sipv<4|6>/block/<cidr>", ekey, BlockPrefix)
		}
		p, err := ParseBlockKeySegment(parts[2])
		if err != nil {
			return k, true, fmt.Errorf("block key %q: %w", ekey, err)
		}
		if parts[0] != fmt.Sprintf("ipv%d", IPVersion(p)) {
			return k, true, fmt.Errorf("block key %q: %s is not under %s", ekey, p, parts[0])
		}
		return ParsedKey{Name: BlockName(p), CIDR: p}, true, nil
	case v3.KindBlockAffinity:
		for _, typ := range AffinityTypes {
			rest, found := strings.CutPrefix(ekey, Prefix+typ+"/")
			if !found {
				continue
			}
			parts := strings.Split(rest, "/")
			if len(parts) != 4 || parts[0] == "" || parts[2] != "block" {
				return k, true, fmt.Errorf("%q is not %s%s/<node>/ipv<4|6>/block/<cidr>", ekey, Prefix, typ)
			}
			p, err := ParseBlockKeySegment(parts[3])
			if err != nil {
				return k, true, fmt.Errorf("block affinity key %q: %w", ekey, err)
			}
			if parts[1] != fmt.Sprintf("ipv%d", IPVersion(p)) {
				return k, true, fmt.Errorf("block affinity key %q: %s is not under %s", ekey, p, parts[1])
			}
			return ParsedKey{Name: AffinityName(parts[0], p), CIDR: p, Node: parts[0], Type: typ}, true, nil
		}
		return k, false, nil
	}
	return k, false, nil
}
