package routes

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Input is what the routes of one node depend on.
type Input struct {
	// ThisNode is the name of the node being programmed.
	ThisNode string
	Nodes    []*v3.Node
	Blocks   []*v3.IPAMBlock
	Pools    []*v3.IPPool
}

// pool is an IPv4 pool's CIDR and encapsulation.
type pool struct {
	cidr  netip.Prefix
	ipip  v3.IPIPMode
	vxlan v3.VXLANMode
}

// nodeInfo is what a node contributes to routes.
type nodeInfo struct {
	addr     netip.Prefix // the node's address with its subnet's length
	vtepAddr netip.Addr
	vtepMAC  net.HardwareAddr
	ipipAddr netip.Addr
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
	anyIPIP, anyVXLAN := false, false
	for _, p := range in.Pools {
		cidr, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil {
			bad(v3.KindIPPool, p.Name, "cidr %q: %v", p.Spec.CIDR, err)
			continue
		}
		if !cidr.Addr().Is4() {
			continue // IPv6 pools: VXLAN-v6 is not done yet
		}
		pl := pool{cidr: cidr.Masked(), ipip: p.Spec.IPIPMode, vxlan: p.Spec.VXLANMode}
		pools = append(pools, pl)
		d.Pools = append(d.Pools, pl.cidr)
		anyIPIP = anyIPIP || encaps(string(pl.ipip))
		anyVXLAN = anyVXLAN || encaps(string(pl.vxlan))
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
		return d, append(probs, Problem{Kind: v3.KindNode, Name: in.ThisNode, Reason: "this node has no Node resource with an IPv4 address yet"})
	}
	if anyVXLAN {
		if me.vtepAddr.IsValid() {
			d.VXLAN = &VTEP{Addr: me.vtepAddr, MAC: me.vtepMAC, Parent: me.addr.Addr()}
		} else {
			bad(v3.KindNode, in.ThisNode, "a pool uses VXLAN but this node has no ipv4VXLANTunnelAddr yet")
		}
	}
	if anyIPIP {
		if me.ipipAddr.IsValid() {
			d.IPIP = me.ipipAddr
		} else {
			bad(v3.KindNode, in.ThisNode, "a pool uses IPIP but this node has no bgp.ipv4IPIPTunnelAddr yet")
		}
	}

	for _, b := range in.Blocks {
		node, ok := affineNode(b)
		if !ok || node == in.ThisNode || b.Spec.Deleted {
			continue
		}
		cidr, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil || !cidr.Addr().Is4() {
			continue
		}
		pl, ok := poolOf(pools, cidr)
		if !ok {
			continue // not in any pool: no route (as Calico)
		}
		peer, ok := nodes[node]
		if !ok {
			continue // the node is gone: its blocks lose their routes
		}
		same := me.addr.Contains(peer.addr.Addr())
		r := Route{Dst: cidr.Masked(), Node: node}
		switch {
		case wants(string(pl.vxlan), same):
			if d.VXLAN == nil {
				continue
			}
			if !peer.vtepAddr.IsValid() {
				bad(v3.KindNode, node, "no ipv4VXLANTunnelAddr: no VXLAN route to its block %s", cidr)
				continue
			}
			r.Gw, r.Dev, r.OnLink = peer.vtepAddr, VXLANDevice, true
		case wants(string(pl.ipip), same):
			if !d.IPIP.IsValid() {
				continue
			}
			r.Gw, r.Dev, r.OnLink = peer.addr.Addr(), IPIPDevice, true
		case encaps(string(pl.vxlan)) || encaps(string(pl.ipip)):
			// CrossSubnet to a node on our subnet: straight over the
			// underlay to the node's address.
			r.Gw = peer.addr.Addr()
		default:
			continue // Never: BGP's job
		}
		d.Routes = append(d.Routes, r)
	}
	slices.SortFunc(d.Routes, func(a, b Route) int { return comparePrefix(a.Dst, b.Dst) })
	// Two nodes claiming one block: keep the first (sorted) only.
	d.Routes = slices.CompactFunc(d.Routes, func(a, b Route) bool { return a.Dst == b.Dst })

	if d.VXLAN != nil {
		// Every remote VTEP gets its ARP and FDB entries, not only those
		// with a block right now: a node's VTEP is reachable before its
		// first pod (Calico programs them per VTEP, too).
		for name, peer := range nodes {
			if name == in.ThisNode || !peer.vtepAddr.IsValid() {
				continue
			}
			d.Neighbors = append(d.Neighbors, Neighbor{IP: peer.vtepAddr, MAC: peer.vtepMAC.String()})
			d.FDB = append(d.FDB, FDBEntry{MAC: peer.vtepMAC.String(), Dst: peer.addr.Addr()})
		}
		slices.SortFunc(d.Neighbors, func(a, b Neighbor) int { return a.IP.Compare(b.IP) })
		slices.SortFunc(d.FDB, func(a, b FDBEntry) int { return strings.Compare(a.MAC, b.MAC) })
	}
	return d, probs
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

// parseNode reads a Node's IPv4 address and tunnel settings.
func parseNode(n *v3.Node) (nodeInfo, error) {
	var info nodeInfo
	if n.Spec.BGP == nil || n.Spec.BGP.IPv4Address == "" {
		return info, fmt.Errorf("no bgp.ipv4Address")
	}
	a := n.Spec.BGP.IPv4Address
	p, err := netip.ParsePrefix(a)
	if err != nil {
		ip, err2 := netip.ParseAddr(a)
		if err2 != nil {
			return info, fmt.Errorf("bgp.ipv4Address %q: %w", a, err)
		}
		p = netip.PrefixFrom(ip, 32)
	}
	if !p.Addr().Is4() {
		return info, fmt.Errorf("bgp.ipv4Address %q is not IPv4", a)
	}
	info.addr = p
	if s := n.Spec.BGP.IPv4IPIPTunnelAddr; s != "" {
		if info.ipipAddr, err = netip.ParseAddr(s); err != nil {
			return info, fmt.Errorf("bgp.ipv4IPIPTunnelAddr %q: %w", s, err)
		}
	}
	if s := n.Spec.IPv4VXLANTunnelAddr; s != "" {
		if info.vtepAddr, err = netip.ParseAddr(s); err != nil {
			return info, fmt.Errorf("ipv4VXLANTunnelAddr %q: %w", s, err)
		}
		info.vtepMAC = DefaultVTEPMAC(n.Name)
		if m := n.Spec.VXLANTunnelMACAddr; m != "" {
			if info.vtepMAC, err = net.ParseMAC(m); err != nil {
				return info, fmt.Errorf("vxlanTunnelMACAddr %q: %w", m, err)
			}
		}
	}
	return info, nil
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
