// Package infra is felix's one reading of the cluster's infrastructure:
// the Nodes and IP pools, interpreted once into what the policy path
// (the all-hosts and VXLAN-hosts sets of the tunnel INPUT rules, NAT
// outgoing's pools) and the route manager (each node's address, subnet,
// VXLAN tunnel endpoint and IPIP address; each pool's encapsulation)
// consume. Both read the same Cluster, so they cannot disagree about a
// node: a node felix routes to is a node whose tunnelled packets it
// accepts.
//
// Addresses are read as Calico reads them (libcalico-go's
// ParseCIDROrIP, i.e. Go's net.ParseCIDR then net.ParseIP): an address
// with its prefix length ("10.0.0.2/24", host bits allowed), a bare
// address ("10.0.0.2", taken as /32 or /128), and an IPv4-mapped IPv6
// address ("::ffff:10.0.0.2", an IPv4 address). A field that cannot be
// read (or holds the wrong IP version) is left out of the node and
// reported as a Problem, never silently dropped; the rest of the node is
// kept.
//
// The package is pure: Derive is deterministic and does no I/O.
package infra

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Cluster is the infrastructure derived from the Nodes and IP pools.
// It is immutable once derived; share it freely between goroutines.
type Cluster struct {
	// Nodes by name (nodes with no usable address are here too, with
	// invalid addresses).
	Nodes map[string]*Node
	// Pools are the pools with a valid CIDR, sorted by CIDR.
	Pools []Pool
	// Problems are the fields that could not be read, sorted.
	Problems []Problem
}

// Node is what felix needs of one Node resource.
type Node struct {
	Name string
	// V4 and V6 are the node's address, VTEP and VTEP MAC per IP version.
	V4, V6 Family
	// IPIPAddr is tunl0's address (bgp.ipv4IPIPTunnelAddr); invalid if none.
	IPIPAddr netip.Addr
}

// Family is a node's address of one IP version and its VXLAN tunnel
// endpoint of that version.
type Family struct {
	// Addr is the node's address with its subnet's length (a bare
	// address is a /32 or /128); invalid when the node has none.
	Addr netip.Prefix
	// VTEP is the address of the node's VXLAN device; invalid if none.
	VTEP netip.Addr
	// VTEPMAC is the VXLAN device's MAC: the Node's, or DefaultVTEPMAC
	// when it records none. Nil when VTEP is invalid.
	VTEPMAC net.HardwareAddr
	// WireguardKey is the node's WireGuard public key of this version
	// (status.wireguardPublicKey(V6), as Calico's felix publishes it);
	// the zero key when none or unreadable.
	WireguardKey wgtypes.Key
	// WireguardAddr is the node's WireGuard device address
	// (spec.wireguard.interfaceIPv4Address/IPv6Address); invalid if none.
	WireguardAddr netip.Addr
}

// Fam returns the node's family of one IP version.
func (n *Node) Fam(v6 bool) Family {
	if v6 {
		return n.V6
	}
	return n.V4
}

// HasAddress says whether the node has an address of either IP version.
func (n *Node) HasAddress() bool { return n.V4.Addr.IsValid() || n.V6.Addr.IsValid() }

// Pool is an IP pool's CIDR and what it asks of the dataplane.
type Pool struct {
	Name string
	// CIDR is the pool's network (host bits cleared).
	CIDR netip.Prefix
	// IPIP is "" for IPv6 pools (IPIP is IPv4 only).
	IPIP        v3.IPIPMode
	VXLAN       v3.VXLANMode
	NATOutgoing bool
}

// Problem is a field of a Node or IP pool that could not be read; the
// field is left out, the rest of the object is used.
type Problem struct {
	Kind, Name, Field, Value, Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s %q: %s", p.Kind, p.Name, p.Field, p.Value, p.Reason)
}

// Derive reads the pools and nodes (in any order). It is pure and
// deterministic.
func Derive(pools []*v3.IPPool, nodes []*v3.Node) *Cluster {
	c := &Cluster{Nodes: make(map[string]*Node, len(nodes))}
	for _, p := range pools {
		if pl, ok := c.readPool(p); ok {
			c.Pools = append(c.Pools, pl)
		}
	}
	slices.SortFunc(c.Pools, func(a, b Pool) int { return cmp.Or(ComparePrefix(a.CIDR, b.CIDR), strings.Compare(a.Name, b.Name)) })
	for _, n := range nodes {
		c.Nodes[n.Name] = c.readNode(n)
	}
	slices.SortFunc(c.Problems, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name), strings.Compare(a.Field, b.Field))
	})
	return c
}

func (c *Cluster) bad(kind, name, field, value, reason string) {
	c.Problems = append(c.Problems, Problem{Kind: kind, Name: name, Field: field, Value: value, Reason: reason})
}

func (c *Cluster) readPool(p *v3.IPPool) (Pool, bool) {
	cidr, err := ParsePrefix(p.Spec.CIDR)
	if err != nil {
		c.bad(v3.KindIPPool, p.Name, "cidr", p.Spec.CIDR, err.Error())
		return Pool{}, false
	}
	pl := Pool{Name: p.Name, CIDR: cidr.Masked(), IPIP: p.Spec.IPIPMode, VXLAN: p.Spec.VXLANMode, NATOutgoing: p.Spec.NATOutgoing}
	if cidr.Addr().Is6() {
		pl.IPIP = ""
	}
	return pl, true
}

func (c *Cluster) readNode(n *v3.Node) *Node {
	node := &Node{Name: n.Name}
	if b := n.Spec.BGP; b != nil {
		node.V4.Addr = c.nodeAddr(n.Name, "bgp.ipv4Address", b.IPv4Address, false)
		node.V6.Addr = c.nodeAddr(n.Name, "bgp.ipv6Address", b.IPv6Address, true)
		node.IPIPAddr = c.nodeIP(n.Name, "bgp.ipv4IPIPTunnelAddr", b.IPv4IPIPTunnelAddr, false)
	}
	node.V4.VTEP = c.nodeIP(n.Name, "ipv4VXLANTunnelAddr", n.Spec.IPv4VXLANTunnelAddr, false)
	node.V4.VTEPMAC = c.vtepMAC(n.Name, "vxlanTunnelMACAddr", n.Spec.VXLANTunnelMACAddr, n.Name, &node.V4.VTEP)
	node.V6.VTEP = c.nodeIP(n.Name, "ipv6VXLANTunnelAddr", n.Spec.IPv6VXLANTunnelAddr, true)
	node.V6.VTEPMAC = c.vtepMAC(n.Name, "vxlanTunnelMACAddrV6", n.Spec.VXLANTunnelMACAddrV6, "v6/"+n.Name, &node.V6.VTEP)
	if w := n.Spec.Wireguard; w != nil {
		node.V4.WireguardAddr = c.nodeIP(n.Name, "wireguard.interfaceIPv4Address", w.InterfaceIPv4Address, false)
		node.V6.WireguardAddr = c.nodeIP(n.Name, "wireguard.interfaceIPv6Address", w.InterfaceIPv6Address, true)
	}
	if st := n.Status; st != nil {
		node.V4.WireguardKey = c.wireguardKey(n.Name, "status.wireguardPublicKey", st.WireguardPublicKey)
		node.V6.WireguardKey = c.wireguardKey(n.Name, "status.wireguardPublicKeyV6", st.WireguardPublicKeyV6)
	}
	return node
}

// wireguardKey reads a WireGuard public key ("" is none).
func (c *Cluster) wireguardKey(node, field, s string) wgtypes.Key {
	if s == "" {
		return wgtypes.Key{}
	}
	k, err := wgtypes.ParseKey(s)
	if err != nil {
		c.bad(v3.KindNode, node, field, s, err.Error())
		return wgtypes.Key{}
	}
	return k
}

// nodeAddr reads a node address field ("" is none).
func (c *Cluster) nodeAddr(node, field, s string, v6 bool) netip.Prefix {
	if s == "" {
		return netip.Prefix{}
	}
	p, err := ParsePrefix(s)
	if err == nil && p.Addr().Is6() != v6 {
		err = fmt.Errorf("not an IPv%d address", ipVersion(v6))
	}
	if err != nil {
		c.bad(v3.KindNode, node, field, s, err.Error())
		return netip.Prefix{}
	}
	return p
}

// nodeIP reads a node's tunnel address field ("" is none).
func (c *Cluster) nodeIP(node, field, s string, v6 bool) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	a, err := ParseAddr(s)
	if err == nil && a.Is6() != v6 {
		err = fmt.Errorf("not an IPv%d address", ipVersion(v6))
	}
	if err != nil {
		c.bad(v3.KindNode, node, field, s, err.Error())
		return netip.Addr{}
	}
	return a
}

// vtepMAC reads a VTEP's MAC; without a VTEP there is none, and a MAC
// that cannot be read leaves the node without its VTEP (another MAC
// would not be the one its device has).
func (c *Cluster) vtepMAC(node, field, s, seed string, vtep *netip.Addr) net.HardwareAddr {
	if !vtep.IsValid() {
		return nil
	}
	if s == "" {
		return DefaultVTEPMAC(seed)
	}
	mac, err := net.ParseMAC(s)
	if err != nil {
		c.bad(v3.KindNode, node, field, s, err.Error()+" (the node's VXLAN tunnel endpoint is left out)")
		*vtep = netip.Addr{}
		return nil
	}
	return mac
}

// ParsePrefix reads an address as Calico does (ParseCIDROrIP): a CIDR
// (host bits kept), or a bare address as a /32 or /128; an IPv4-mapped
// IPv6 address is IPv4. Zones are refused (Calico's net.ParseIP refuses
// them too).
func ParsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("not an address or CIDR")
		}
		a, _ := netip.AddrFromSlice(ip)
		bits, total := n.Mask.Size()
		if total == 128 && a.Is4In6() {
			bits -= 96 // an IPv4-mapped address written with an IPv6 prefix length
		}
		a = a.Unmap()
		if bits < 0 {
			return netip.Prefix{}, fmt.Errorf("prefix length too short for an IPv4-mapped address")
		}
		return netip.PrefixFrom(a, bits), nil
	}
	a, err := ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ParseAddr reads a bare address as Calico does (net.ParseIP): an
// IPv4-mapped IPv6 address is IPv4; zones are refused.
func ParseAddr(s string) (netip.Addr, error) {
	ip := net.ParseIP(s)
	if ip == nil {
		return netip.Addr{}, fmt.Errorf("not an IP address")
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap(), nil
}

// DefaultVTEPMAC is the VTEP MAC of a node whose Node resource records
// none: derived from its name (locally administered, unicast), so every
// node computes the same one.
func DefaultVTEPMAC(node string) net.HardwareAddr {
	h := sha256.Sum256([]byte("vxlan.calico/" + node))
	mac := net.HardwareAddr(h[:6])
	mac[0] = mac[0]&0xfe | 0x02
	return mac
}

// Node returns the named node (nil, false when there is no such Node).
func (c *Cluster) Node(name string) (*Node, bool) {
	n, ok := c.Nodes[name]
	return n, ok
}

// NodeNames returns the nodes' names, sorted.
func (c *Cluster) NodeNames() []string { return slices.Sorted(maps.Keys(c.Nodes)) }

// AllHosts are every node's addresses (both IP versions), sorted: the
// sources from which the node accepts IPIP (Calico's all-hosts-net set).
func (c *Cluster) AllHosts() []netip.Addr {
	var out []netip.Addr
	for _, n := range c.Nodes {
		for _, f := range []Family{n.V4, n.V6} {
			if f.Addr.IsValid() {
				out = append(out, f.Addr.Addr())
			}
		}
	}
	return sortedUnique(out)
}

// VXLANHosts are the addresses of the nodes with a VTEP of that
// address's IP version, sorted: the sources from which the node accepts
// VXLAN (Calico's all-vxlan-net set).
func (c *Cluster) VXLANHosts() []netip.Addr {
	var out []netip.Addr
	for _, n := range c.Nodes {
		for _, f := range []Family{n.V4, n.V6} {
			if f.Addr.IsValid() && f.VTEP.IsValid() {
				out = append(out, f.Addr.Addr())
			}
		}
	}
	return sortedUnique(out)
}

// UsesIPIP says whether an (IPv4) pool encapsulates with IPIP.
func (c *Cluster) UsesIPIP() bool {
	return slices.ContainsFunc(c.Pools, func(p Pool) bool { return Encaps(string(p.IPIP)) })
}

// UsesVXLAN says whether a pool of the IP version encapsulates with
// VXLAN; v6 nil means either version.
func (c *Cluster) UsesVXLAN(v6 *bool) bool {
	return slices.ContainsFunc(c.Pools, func(p Pool) bool {
		return Encaps(string(p.VXLAN)) && (v6 == nil || p.CIDR.Addr().Is6() == *v6)
	})
}

// PoolOf returns the first pool (in CIDR order) holding the whole of
// block.
func (c *Cluster) PoolOf(block netip.Prefix) (Pool, bool) {
	for _, p := range c.Pools {
		if p.CIDR.Contains(block.Addr()) && p.CIDR.Bits() <= block.Bits() {
			return p, true
		}
	}
	return Pool{}, false
}

// Encaps says whether a pool mode (IPIP or VXLAN) encapsulates at all.
func Encaps(mode string) bool { return mode == "Always" || mode == "CrossSubnet" }

// ComparePrefix orders prefixes by address, then length.
func ComparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), a.Bits()-b.Bits())
}

func sortedUnique(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}

func ipVersion(v6 bool) int {
	if v6 {
		return 6
	}
	return 4
}
