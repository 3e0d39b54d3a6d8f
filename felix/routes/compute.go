package routes

import (
	"cmp"
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/ipam"
)

// Input is what the routes of one node depend on.
type Input struct {
	// ThisNode is the name of the node being programmed.
	ThisNode string
	Nodes    []*v3.Node
	Blocks   []*v3.IPAMBlock
	Pools    []*v3.IPPool
	// Workloads are the WorkloadEndpoints; this node's give the local
	// routes (address -> its host-side interface), as the CNI writes them.
	Workloads []*v3.WorkloadEndpoint
}

// pool is a pool's CIDR and encapsulation.
type pool struct {
	cidr  netip.Prefix
	ipip  v3.IPIPMode
	vxlan v3.VXLANMode
}

// famInfo is a node's address of one IP version (with its subnet's
// length) and its VTEP of that version.
type famInfo struct {
	addr     netip.Prefix
	vtepAddr netip.Addr
	vtepMAC  net.HardwareAddr
}

// nodeInfo is what a node contributes to routes.
type nodeInfo struct {
	v4, v6   famInfo
	ipipAddr netip.Addr
}

func (n nodeInfo) fam(v6 bool) famInfo {
	if v6 {
		return n.v6
	}
	return n.v4
}

// Compute returns the desired routing state of in.ThisNode. It is pure
// and deterministic; input it cannot use is reported and skipped.
func Compute(in Input) (Desired, []Problem) {
	var d Desired
	var probs []Problem
	bad := func(kind, name, format string, args ...any) {
		probs = append(probs, Problem{Kind: kind, Name: name, Reason: fmt.Sprintf(format, args...)})
	}

	var pools []pool
	anyIPIP := false
	anyVXLAN := map[bool]bool{} // by v6
	for _, p := range in.Pools {
		cidr, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil {
			bad(v3.KindIPPool, p.Name, "cidr %q: %v", p.Spec.CIDR, err)
			continue
		}
		pl := pool{cidr: cidr.Masked(), ipip: p.Spec.IPIPMode, vxlan: p.Spec.VXLANMode}
		if cidr.Addr().Is6() {
			pl.ipip = "" // IPIP is IPv4 only
		}
		pools = append(pools, pl)
		d.Pools = append(d.Pools, pl.cidr)
		anyIPIP = anyIPIP || encaps(string(pl.ipip))
		anyVXLAN[cidr.Addr().Is6()] = anyVXLAN[cidr.Addr().Is6()] || encaps(string(pl.vxlan))
	}
	slices.SortFunc(d.Pools, comparePrefix)

	nodes := map[string]nodeInfo{}
	for _, n := range in.Nodes {
		info, err := parseNode(n)
		if err != nil {
			bad(v3.KindNode, n.Name, "%v", err)
			continue
		}
		nodes[n.Name] = info
	}
	me, haveMe := nodes[in.ThisNode]
	if !haveMe {
		// Without our own address nothing can be decided (subnets, VTEP).
		return d, append(probs, Problem{Kind: v3.KindNode, Name: in.ThisNode, Reason: "this node has no Node resource with an address yet"})
	}
	vteps := map[bool]**VTEP{false: &d.VXLAN, true: &d.VXLANv6}
	for _, v6 := range []bool{false, true} {
		if !anyVXLAN[v6] {
			continue
		}
		f := me.fam(v6)
		if f.vtepAddr.IsValid() && f.addr.IsValid() {
			*vteps[v6] = &VTEP{Addr: f.vtepAddr, MAC: f.vtepMAC, Parent: f.addr.Addr()}
		} else {
			bad(v3.KindNode, in.ThisNode, "a pool uses IPv%d VXLAN but this node has no IPv%d VXLAN tunnel address or no IPv%d address yet", ipVersion(v6), ipVersion(v6), ipVersion(v6))
		}
	}
	if anyIPIP {
		if me.ipipAddr.IsValid() {
			d.IPIP = me.ipipAddr
		} else {
			bad(v3.KindNode, in.ThisNode, "a pool uses IPIP but this node has no bgp.ipv4IPIPTunnelAddr yet")
		}
	}

	// routeTo is the route to dst (a block, or a borrowed address) on
	// node, by the encapsulation of its pool pl.
	routeTo := func(dst netip.Prefix, node string, pl pool) (Route, bool) {
		peer, ok := nodes[node]
		if !ok {
			return Route{}, false // the node is gone: no route
		}
		v6 := dst.Addr().Is6()
		mine, theirs := me.fam(v6), peer.fam(v6)
		if !mine.addr.IsValid() || !theirs.addr.IsValid() {
			return Route{}, false
		}
		same := mine.addr.Contains(theirs.addr.Addr())
		r := Route{Dst: dst, Node: node}
		switch {
		case wants(string(pl.vxlan), same):
			if *vteps[v6] == nil {
				return Route{}, false
			}
			if !theirs.vtepAddr.IsValid() {
				bad(v3.KindNode, node, "no IPv%d VXLAN tunnel address: no VXLAN route to %s", ipVersion(v6), dst)
				return Route{}, false
			}
			r.Gw, r.Dev, r.OnLink = theirs.vtepAddr, vxlanDev(v6), true
		case wants(string(pl.ipip), same):
			if !d.IPIP.IsValid() {
				return Route{}, false
			}
			r.Gw, r.Dev, r.OnLink = theirs.addr.Addr(), IPIPDevice, true
		case encaps(string(pl.vxlan)) || encaps(string(pl.ipip)):
			// CrossSubnet to a node on our subnet: straight over the
			// underlay to the node's address.
			r.Gw = theirs.addr.Addr()
		default:
			return Route{}, false // Never: BGP's job
		}
		return r, true
	}
	for _, b := range in.Blocks {
		if b.Spec.Deleted {
			continue
		}
		cidr, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			continue
		}
		cidr = cidr.Masked()
		pl, ok := poolOf(pools, cidr)
		if !ok {
			continue // not in any pool: no route (as Calico)
		}
		node, affine := affineNode(b)
		if affine && node != in.ThisNode {
			if r, ok := routeTo(cidr, node, pl); ok {
				d.Routes = append(d.Routes, r)
			}
		}
		// Borrowed addresses: an address of the block used by another
		// node than the block's gets a host route to that node (as
		// Calico's route resolver); ours are the CNI's.
		for o, a := range b.Spec.Allocations {
			if a == nil || *a < 0 || *a >= len(b.Spec.Attributes) {
				continue
			}
			owner := b.Spec.Attributes[*a].ActiveOwnerAttrs[ipam.AttrNode]
			if owner == "" || owner == node || owner == in.ThisNode {
				continue
			}
			ip := ipam.OrdinalToIP(cidr, o)
			if r, ok := routeTo(netip.PrefixFrom(ip, ip.BitLen()), owner, pl); ok {
				d.Routes = append(d.Routes, r)
			}
		}
	}
	for _, w := range in.Workloads {
		if w.Spec.Node != in.ThisNode || w.Spec.InterfaceName == "" {
			continue
		}
		for _, n := range w.Spec.IPNetworks {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				a, err2 := netip.ParseAddr(n)
				if err2 != nil {
					bad(v3.KindWorkloadEndpoint, w.Namespace+"/"+w.Name, "ipNetworks %q: %v", n, err)
					continue
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			d.Routes = append(d.Routes, Route{Dst: p.Masked(), Dev: w.Spec.InterfaceName, Workload: true, Node: in.ThisNode})
		}
	}
	slices.SortFunc(d.Routes, func(a, b Route) int { return comparePrefix(a.Dst, b.Dst) })
	// Two nodes claiming one block: keep the first (sorted) only.
	d.Routes = slices.CompactFunc(d.Routes, func(a, b Route) bool { return a.Dst == b.Dst })

	// Every remote VTEP gets its ARP/NDP and FDB entries, not only those
	// with a block right now: a node's VTEP is reachable before its first
	// pod (Calico programs them per VTEP, too).
	for _, v6 := range []bool{false, true} {
		if *vteps[v6] == nil {
			continue
		}
		for name, peer := range nodes {
			f := peer.fam(v6)
			if name == in.ThisNode || !f.vtepAddr.IsValid() || !f.addr.IsValid() {
				continue
			}
			d.Neighbors = append(d.Neighbors, Neighbor{Dev: vxlanDev(v6), IP: f.vtepAddr, MAC: f.vtepMAC.String()})
			d.FDB = append(d.FDB, FDBEntry{Dev: vxlanDev(v6), MAC: f.vtepMAC.String(), Dst: f.addr.Addr()})
		}
	}
	slices.SortFunc(d.Neighbors, func(a, b Neighbor) int { return cmp.Or(strings.Compare(a.Dev, b.Dev), a.IP.Compare(b.IP)) })
	slices.SortFunc(d.FDB, func(a, b FDBEntry) int { return cmp.Or(strings.Compare(a.Dev, b.Dev), strings.Compare(a.MAC, b.MAC)) })
	return d, probs
}

func ipVersion(v6 bool) int {
	if v6 {
		return 6
	}
	return 4
}

func vxlanDev(v6 bool) string {
	if v6 {
		return VXLANDeviceV6
	}
	return VXLANDevice
}

func encaps(mode string) bool { return mode == "Always" || mode == "CrossSubnet" }

// wants says whether a pool mode encapsulates towards a node on (same)
// or off our subnet.
func wants(mode string, same bool) bool {
	return mode == "Always" || (mode == "CrossSubnet" && !same)
}

func poolOf(pools []pool, block netip.Prefix) (pool, bool) {
	for _, p := range pools {
		if p.cidr.Contains(block.Addr()) && p.cidr.Bits() <= block.Bits() {
			return p, true
		}
	}
	return pool{}, false
}

func affineNode(b *v3.IPAMBlock) (string, bool) {
	if b.Spec.Affinity == nil {
		return "", false
	}
	return strings.CutPrefix(*b.Spec.Affinity, "host:")
}

// parseNode reads a Node's addresses and tunnel settings.
func parseNode(n *v3.Node) (nodeInfo, error) {
	var info nodeInfo
	if n.Spec.BGP == nil || (n.Spec.BGP.IPv4Address == "" && n.Spec.BGP.IPv6Address == "") {
		return info, fmt.Errorf("no bgp.ipv4Address or bgp.ipv6Address")
	}
	var err error
	if info.v4.addr, err = parseNodeAddr("bgp.ipv4Address", n.Spec.BGP.IPv4Address, false); err != nil {
		return info, err
	}
	if info.v6.addr, err = parseNodeAddr("bgp.ipv6Address", n.Spec.BGP.IPv6Address, true); err != nil {
		return info, err
	}
	if s := n.Spec.BGP.IPv4IPIPTunnelAddr; s != "" {
		if info.ipipAddr, err = netip.ParseAddr(s); err != nil {
			return info, fmt.Errorf("bgp.ipv4IPIPTunnelAddr %q: %w", s, err)
		}
	}
	for _, v := range []struct {
		field, addr, macField, mac, seed string
		dst                              *famInfo
	}{
		{"ipv4VXLANTunnelAddr", n.Spec.IPv4VXLANTunnelAddr, "vxlanTunnelMACAddr", n.Spec.VXLANTunnelMACAddr, n.Name, &info.v4},
		{"ipv6VXLANTunnelAddr", n.Spec.IPv6VXLANTunnelAddr, "vxlanTunnelMACAddrV6", n.Spec.VXLANTunnelMACAddrV6, "v6/" + n.Name, &info.v6},
	} {
		if v.addr == "" {
			continue
		}
		if v.dst.vtepAddr, err = netip.ParseAddr(v.addr); err != nil {
			return info, fmt.Errorf("%s %q: %w", v.field, v.addr, err)
		}
		v.dst.vtepMAC = DefaultVTEPMAC(v.seed)
		if v.mac != "" {
			if v.dst.vtepMAC, err = net.ParseMAC(v.mac); err != nil {
				return info, fmt.Errorf("%s %q: %w", v.macField, v.mac, err)
			}
		}
	}
	return info, nil
}

// parseNodeAddr parses an address with prefix length (a bare address is
// taken as a host route); "" is no address.
func parseNodeAddr(field, s string, v6 bool) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		ip, err2 := netip.ParseAddr(s)
		if err2 != nil {
			return p, fmt.Errorf("%s %q: %w", field, s, err)
		}
		p = netip.PrefixFrom(ip, ip.BitLen())
	}
	if p.Addr().Is6() != v6 {
		return p, fmt.Errorf("%s %q is not IPv%d", field, s, ipVersion(v6))
	}
	return p, nil
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

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
