package routes

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/wireguard"
	"github.com/tabbynet/tabby/ipam"
)

// Input is what the routes of one node depend on.
type Input struct {
	// ThisNode is the name of the node being programmed.
	ThisNode string
	// Cluster is the Nodes and IP pools as felix reads them (the same
	// reading the policy path's tunnel rules use); nil is none.
	Cluster *infra.Cluster
	Blocks  []*v3.IPAMBlock
	// Workloads are the WorkloadEndpoints; this node's give the local
	// routes (address -> its host-side interface), as the CNI writes them.
	Workloads []*v3.WorkloadEndpoint
	// Wireguard is the WireGuard configuration per IP version (IPv4, IPv6).
	Wireguard [2]wireguard.Config
}

// Compute returns the desired routing state of in.ThisNode. It is pure
// and deterministic; input it cannot use is reported and skipped.
//
// Local workload routes never depend on this node's own Node resource:
// without an address (no Node yet, or none recorded) the node keeps its
// pods' routes and gets no tunnel devices and no routes to other nodes
// (which need its address to choose between direct and encapsulated).
func Compute(in Input) (Desired, []Problem) {
	c := computation{in: in, cl: in.Cluster}
	if c.cl == nil {
		c.cl = infra.Derive(nil, nil)
	}
	for _, p := range c.cl.Pools {
		c.d.Pools = append(c.d.Pools, p.CIDR)
	}
	c.localRoutes()
	if me, ok := c.cl.Node(in.ThisNode); ok && me.HasAddress() {
		c.me = me
		c.tunnelDevices()
		c.blockRoutes()
		c.vtepNeighbors()
	}
	c.wireguard()
	slices.SortFunc(c.d.Routes, func(a, b Route) int { return infra.ComparePrefix(a.Dst, b.Dst) })
	// Two nodes claiming one block: keep the first (sorted) only.
	c.d.Routes = slices.CompactFunc(c.d.Routes, func(a, b Route) bool { return a.Dst == b.Dst })
	return c.d, c.probs
}

// computation is one run of Compute.
type computation struct {
	in    Input
	cl    *infra.Cluster
	me    *infra.Node // this node, when it has an address
	d     Desired
	probs []Problem
}

func (c *computation) bad(kind, name, format string, args ...any) {
	c.probs = append(c.probs, Problem{Kind: kind, Name: name, Reason: fmt.Sprintf(format, args...)})
}

// wireguard computes the WireGuard state of both IP versions (its own
// table, beside the main table's routes: see felix/wireguard).
func (c *computation) wireguard() {
	for i, cfg := range c.in.Wireguard {
		d, probs := wireguard.Compute(cfg, wireguard.Input{ThisNode: c.in.ThisNode, Cluster: c.cl, Blocks: c.in.Blocks})
		c.d.Wireguard[i] = d
		for _, p := range probs {
			c.bad(v3.KindNode, p.Node, "%s", p.Reason)
		}
	}
}

// localRoutes are this node's workload addresses on their host-side
// interfaces, as the CNI writes them.
func (c *computation) localRoutes() {
	for _, w := range c.in.Workloads {
		if w.Spec.Node != c.in.ThisNode || w.Spec.InterfaceName == "" {
			continue
		}
		for _, n := range w.Spec.IPNetworks {
			p, err := infra.ParsePrefix(n)
			if err != nil {
				c.bad(v3.KindWorkloadEndpoint, w.Namespace+"/"+w.Name, "ipNetworks %q: %v", n, err)
				continue
			}
			c.d.Routes = append(c.d.Routes, Route{Dst: p.Masked(), Dev: w.Spec.InterfaceName, Workload: true, Node: c.in.ThisNode})
		}
	}
}

// tunnelDevices sets this node's VTEPs and tunl0 address for the
// encapsulations its pools use.
func (c *computation) tunnelDevices() {
	for _, v6 := range []bool{false, true} {
		if !c.cl.UsesVXLAN(&v6) {
			continue
		}
		f := c.me.Fam(v6)
		if f.VTEP.IsValid() && f.Addr.IsValid() {
			*c.vtep(v6) = &VTEP{Addr: f.VTEP, MAC: f.VTEPMAC, Parent: f.Addr.Addr()}
		} else {
			c.bad(v3.KindNode, c.in.ThisNode, "a pool uses IPv%d VXLAN but this node has no IPv%d VXLAN tunnel address or no IPv%d address yet", ipVersion(v6), ipVersion(v6), ipVersion(v6))
		}
	}
	if c.cl.UsesIPIP() {
		if c.me.IPIPAddr.IsValid() {
			c.d.IPIP = c.me.IPIPAddr
		} else {
			c.bad(v3.KindNode, c.in.ThisNode, "a pool uses IPIP but this node has no bgp.ipv4IPIPTunnelAddr yet")
		}
	}
}

func (c *computation) vtep(v6 bool) **VTEP {
	if v6 {
		return &c.d.VXLANv6
	}
	return &c.d.VXLAN
}

// blockRoutes are the routes to the other nodes' blocks and to the
// addresses they borrow.
func (c *computation) blockRoutes() {
	for _, b := range c.in.Blocks {
		if b.Spec.Deleted {
			continue
		}
		cidr, err := netip.ParsePrefix(b.Spec.CIDR)
		if err != nil {
			continue
		}
		cidr = cidr.Masked()
		pl, ok := c.cl.PoolOf(cidr)
		if !ok {
			continue // not in any pool: no route (as Calico)
		}
		node, affine := affineNode(b)
		if affine && node != c.in.ThisNode {
			c.addRouteTo(cidr, node, pl)
		}
		c.borrowedRoutes(b, cidr, node, pl)
	}
}

// borrowedRoutes: an address of the block used by another node than the
// block's gets a host route to that node (as Calico's route resolver);
// ours are the CNI's.
func (c *computation) borrowedRoutes(b *v3.IPAMBlock, cidr netip.Prefix, blockNode string, pl infra.Pool) {
	for o, a := range b.Spec.Allocations {
		if a == nil || *a < 0 || *a >= len(b.Spec.Attributes) {
			continue
		}
		owner := b.Spec.Attributes[*a].ActiveOwnerAttrs[ipam.AttrNode]
		if owner == "" || owner == blockNode || owner == c.in.ThisNode {
			continue
		}
		ip := ipam.OrdinalToIP(cidr, o)
		c.addRouteTo(netip.PrefixFrom(ip, ip.BitLen()), owner, pl)
	}
}

// addRouteTo adds the route to dst (a block, or a borrowed address) on
// node, by the encapsulation of its pool pl, if there is one.
func (c *computation) addRouteTo(dst netip.Prefix, node string, pl infra.Pool) {
	peer, ok := c.cl.Node(node)
	if !ok {
		return // the node is gone: no route
	}
	v6 := dst.Addr().Is6()
	mine, theirs := c.me.Fam(v6), peer.Fam(v6)
	if !theirs.Addr.IsValid() {
		c.bad(v3.KindNode, node, "no IPv%d address: no routes to its blocks", ipVersion(v6))
		return
	}
	if !mine.Addr.IsValid() {
		return // this node has no address of that version (reported by the Manager)
	}
	r := Route{Dst: dst, Node: node}
	switch via := Via(pl, mine, theirs, v6); {
	case via == vxlanDev(v6):
		if *c.vtep(v6) == nil {
			return
		}
		if !theirs.VTEP.IsValid() {
			c.bad(v3.KindNode, node, "no IPv%d VXLAN tunnel address: no VXLAN route to %s", ipVersion(v6), dst)
			return
		}
		r.Gw, r.Dev, r.OnLink = theirs.VTEP, vxlanDev(v6), true
	case via == IPIPDevice:
		if !c.d.IPIP.IsValid() {
			return
		}
		r.Gw, r.Dev, r.OnLink = theirs.Addr.Addr(), IPIPDevice, true
	case infra.Encaps(string(pl.VXLAN)) || infra.Encaps(string(pl.IPIP)):
		// CrossSubnet to a node on our subnet: straight over the
		// underlay to the node's address.
		r.Gw = theirs.Addr.Addr()
	default:
		return // Never: BGP's job
	}
	c.d.Routes = append(c.d.Routes, r)
}

// vtepNeighbors: every remote VTEP gets its ARP/NDP and FDB entries, not
// only those with a block right now: a node's VTEP is reachable before
// its first pod (Calico programs them per VTEP, too).
func (c *computation) vtepNeighbors() {
	for _, v6 := range []bool{false, true} {
		if *c.vtep(v6) == nil {
			continue
		}
		for _, name := range c.cl.NodeNames() {
			f := c.cl.Nodes[name].Fam(v6)
			if name == c.in.ThisNode || !f.VTEP.IsValid() || !f.Addr.IsValid() {
				continue
			}
			c.d.Neighbors = append(c.d.Neighbors, Neighbor{Dev: vxlanDev(v6), IP: f.VTEP, MAC: f.VTEPMAC.String()})
			c.d.FDB = append(c.d.FDB, FDBEntry{Dev: vxlanDev(v6), MAC: f.VTEPMAC.String(), Dst: f.Addr.Addr()})
		}
	}
	slices.SortFunc(c.d.Neighbors, func(a, b Neighbor) int { return cmp.Or(strings.Compare(a.Dev, b.Dev), a.IP.Compare(b.IP)) })
	slices.SortFunc(c.d.FDB, func(a, b FDBEntry) int { return cmp.Or(strings.Compare(a.Dev, b.Dev), strings.Compare(a.MAC, b.MAC)) })
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

// Via is the device felix's routes carry traffic to an address of pool
// pl on node peer through from node me (their addresses of one IP
// version): the VXLAN or IPIP device when the pool encapsulates towards
// peer, "" when the packet goes over the underlay to peer's address
// (BGP's route, or felix's for CrossSubnet within a subnet). calicoctl's
// policy trace reads it to know which interface a forwarded flow
// crosses.
func Via(pl infra.Pool, me, peer infra.Family, v6 bool) string {
	same := me.Addr.Contains(peer.Addr.Addr())
	switch {
	case wants(string(pl.VXLAN), same):
		return vxlanDev(v6)
	case wants(string(pl.IPIP), same):
		return IPIPDevice
	}
	return ""
}

// wants says whether a pool mode encapsulates towards a node on (same)
// or off our subnet.
func wants(mode string, same bool) bool {
	return mode == "Always" || (mode == "CrossSubnet" && !same)
}

func affineNode(b *v3.IPAMBlock) (string, bool) {
	if b.Spec.Affinity == nil {
		return "", false
	}
	return strings.CutPrefix(*b.Spec.Affinity, "host:")
}
