package wireguard

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/ipam"
)

// Input is what one node's WireGuard state depends on.
type Input struct {
	ThisNode string
	// Cluster is felix's one reading of the Nodes and IP pools (their
	// addresses, tunnel addresses and published keys).
	Cluster *infra.Cluster
	Blocks  []*v3.IPAMBlock
}

// Compute returns the WireGuard state cfg asks of in.ThisNode. It is
// pure and deterministic.
//
// Each node's destinations are its affine blocks (in a pool), the block
// addresses it uses elsewhere (borrowed), its IPIP, VXLAN and WireGuard
// tunnel addresses and, with host encryption, its own address: Calico's
// route resolver's routes of a node. A node is peered when it has an
// address of cfg's version and a public key no other node (this one
// included) claims (Calico's shouldProgramWireguardPeer); its
// destinations are routed into the device. The destinations of a node
// that cannot be peered are thrown back to the main table (they travel
// as without WireGuard, as in Calico), and so are this node's own.
func Compute(cfg Config, in Input) (Desired, []Problem) {
	d := Desired{Config: cfg}
	if !cfg.Enabled || in.Cluster == nil {
		return d, nil
	}
	dests := destinations(cfg, in)
	var probs []Problem
	keys := map[wgtypes.Key]int{}
	for _, n := range in.Cluster.Nodes {
		if k := n.Fam(cfg.V6).WireguardKey; k != (wgtypes.Key{}) {
			keys[k]++
		}
	}
	if me, ok := in.Cluster.Node(in.ThisNode); ok {
		d.Addr = me.Fam(cfg.V6).WireguardAddr
	}
	for _, name := range in.Cluster.NodeNames() {
		n := in.Cluster.Nodes[name]
		f := n.Fam(cfg.V6)
		kind := Throw
		switch {
		case name == in.ThisNode:
		case f.WireguardKey == wgtypes.Key{}:
		case keys[f.WireguardKey] > 1:
			probs = append(probs, Problem{Node: name, Reason: "its WireGuard public key is claimed by another node too: not peered"})
		case !f.Addr.IsValid():
		default:
			kind = ViaDevice
			d.Peers = append(d.Peers, Peer{Node: name, PublicKey: f.WireguardKey,
				Endpoint: netip.AddrPortFrom(f.Addr.Addr(), uint16(cfg.ListenPort)), AllowedIPs: dests[name]})
		}
		for _, dst := range dests[name] {
			host := f.Addr.IsValid() && dst.Addr() == f.Addr.Addr()
			d.Routes = append(d.Routes, Route{Dst: dst, Kind: kind, Node: name, Host: host})
		}
	}
	sortRoutes(d.Routes)
	// A destination claimed by two nodes: keep the first (sorted) only,
	// and only in that node's allowed IPs.
	d.Routes = slices.CompactFunc(d.Routes, func(a, b Route) bool { return a.Dst == b.Dst })
	d.Peers = ownedOnly(d.Peers, d.Routes)
	return d, probs
}

// destinations are each node's destinations of cfg's IP version, sorted
// and unique per node.
func destinations(cfg Config, in Input) map[string][]netip.Prefix {
	out := map[string][]netip.Prefix{}
	add := func(node string, a netip.Addr) {
		if a.IsValid() && a.Is6() == cfg.V6 {
			out[node] = append(out[node], netip.PrefixFrom(a, a.BitLen()))
		}
	}
	for name, n := range in.Cluster.Nodes {
		f := n.Fam(cfg.V6)
		add(name, f.VTEP)
		add(name, f.WireguardAddr)
		if !cfg.V6 {
			add(name, n.IPIPAddr)
		}
		if cfg.EncryptHostTraffic && f.Addr.IsValid() {
			add(name, f.Addr.Addr())
		}
	}
	for _, b := range in.Blocks {
		blockDestinations(cfg, in.Cluster, b, out)
	}
	for name, ps := range out {
		slices.SortFunc(ps, infra.ComparePrefix)
		out[name] = slices.Compact(ps)
	}
	return out
}

// blockDestinations adds a block (to its node) and its borrowed
// addresses (to the nodes using them) to out.
func blockDestinations(cfg Config, cl *infra.Cluster, b *v3.IPAMBlock, out map[string][]netip.Prefix) {
	if b.Spec.Deleted {
		return
	}
	cidr, err := netip.ParsePrefix(b.Spec.CIDR)
	if err != nil || cidr.Addr().Is6() != cfg.V6 {
		return
	}
	cidr = cidr.Masked()
	if _, ok := cl.PoolOf(cidr); !ok {
		return // not in any pool: not routed (as Calico)
	}
	node := ""
	if b.Spec.Affinity != nil {
		node, _ = strings.CutPrefix(*b.Spec.Affinity, "host:")
		if _, ok := cl.Node(node); ok {
			out[node] = append(out[node], cidr)
		}
	}
	for o, a := range b.Spec.Allocations {
		if a == nil || *a < 0 || *a >= len(b.Spec.Attributes) {
			continue
		}
		owner := b.Spec.Attributes[*a].ActiveOwnerAttrs[ipam.AttrNode]
		if _, ok := cl.Node(owner); !ok || owner == node {
			continue
		}
		ip := ipam.OrdinalToIP(cidr, o)
		out[owner] = append(out[owner], netip.PrefixFrom(ip, ip.BitLen()))
	}
}

// ownedOnly keeps in each peer's allowed IPs only the destinations the
// routes give to it.
func ownedOnly(peers []Peer, routes []Route) []Peer {
	owner := make(map[netip.Prefix]string, len(routes))
	for _, r := range routes {
		owner[r.Dst] = r.Node
	}
	for i, p := range peers {
		peers[i].AllowedIPs = slices.DeleteFunc(slices.Clone(p.AllowedIPs), func(dst netip.Prefix) bool { return owner[dst] != p.Node })
	}
	return peers
}

func sortRoutes(rs []Route) {
	slices.SortFunc(rs, func(a, b Route) int {
		return cmp.Or(infra.ComparePrefix(a.Dst, b.Dst), strings.Compare(a.Node, b.Node))
	})
}

// FailClosed is d for a node whose kernel cannot hold the device: no
// device and no peers, and every other node's pod and tunnel
// destinations dropped rather than sent in clear (peered or not: whether
// a node could be peered does not matter when this one cannot encrypt).
// This node's own destinations, and other nodes' own addresses (host
// encryption), are still thrown to the main table: dropping those would
// cut the node off its datastore and its BGP peers.
func FailClosed(d Desired, thisNode string) Desired {
	out := Desired{Config: d.Config}
	for _, r := range d.Routes {
		r.Kind = Blackhole
		if r.Node == thisNode || r.Host {
			r.Kind = Throw
		}
		out.Routes = append(out.Routes, r)
	}
	return out
}
