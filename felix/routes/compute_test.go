package routes

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/infra"
)

func node(name, addr, vtep, mac, ipip string) *v3.Node {
	return &v3.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.NodeSpec{
		BGP:                 &v3.NodeBGPSpec{IPv4Address: addr, IPv4IPIPTunnelAddr: ipip},
		IPv4VXLANTunnelAddr: vtep, VXLANTunnelMACAddr: mac,
	}}
}

// wep is a workload endpoint on n0.
func wep(name, iface, ip string) *v3.WorkloadEndpoint {
	return &v3.WorkloadEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v3.WorkloadEndpointSpec{Node: "n0", InterfaceName: iface, IPNetworks: []string{ip}}}
}

func block(cidr, node string) *v3.IPAMBlock {
	aff := "host:" + node
	return &v3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: cidr}, Spec: v3.IPAMBlockSpec{CIDR: cidr, Affinity: &aff}}
}

func ippool(cidr string, ipip v3.IPIPMode, vxlan v3.VXLANMode) *v3.IPPool {
	return &v3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: cidr}, Spec: v3.IPPoolSpec{CIDR: cidr, IPIPMode: ipip, VXLANMode: vxlan}}
}

var (
	a    = netip.MustParseAddr
	pfx  = netip.MustParsePrefix
	macA = "66:00:00:00:00:0a"
	macB = "66:00:00:00:00:0b"
	macC = "66:00:00:00:00:0c"
)

// threeNodes: n0 and n1 share 172.30.1.0/24, n2 is on 172.30.2.0/24.
func threeNodes() []*v3.Node {
	return []*v3.Node{
		node("n0", "172.30.1.10/24", "10.70.0.1", macA, "10.70.0.2"),
		node("n1", "172.30.1.11/24", "10.70.1.1", macB, "10.70.1.2"),
		node("n2", "172.30.2.12/24", "10.70.2.1", macC, "10.70.2.2"),
	}
}

func threeBlocks() []*v3.IPAMBlock {
	return []*v3.IPAMBlock{block("10.70.0.0/26", "n0"), block("10.70.1.0/26", "n1"), block("10.70.2.0/26", "n2")}
}

func TestCompute(t *testing.T) {
	vxlanNeigh := []Neighbor{{Dev: VXLANDevice, IP: a("10.70.1.1"), MAC: macB}, {Dev: VXLANDevice, IP: a("10.70.2.1"), MAC: macC}}
	vxlanFDB := []FDBEntry{{Dev: VXLANDevice, MAC: macB, Dst: a("172.30.1.11")}, {Dev: VXLANDevice, MAC: macC, Dst: a("172.30.2.12")}}
	vtep := &VTEP{Addr: a("10.70.0.1"), MAC: mustMAC(macA), Parent: a("172.30.1.10")}
	pools := []netip.Prefix{pfx("10.70.0.0/16")}
	for _, tc := range []struct {
		name  string
		in    Input
		want  Desired
		probs int
	}{{
		name: "VXLAN Always: every remote block through its node's VTEP",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}, threeNodes()), Blocks: threeBlocks()},
		want: Desired{VXLAN: vtep, Pools: pools, Neighbors: vxlanNeigh, FDB: vxlanFDB, Routes: []Route{
			{Dst: pfx("10.70.1.0/26"), Gw: a("10.70.1.1"), Dev: VXLANDevice, OnLink: true, Node: "n1"},
			{Dst: pfx("10.70.2.0/26"), Gw: a("10.70.2.1"), Dev: VXLANDevice, OnLink: true, Node: "n2"},
		}},
	}, {
		name: "VXLAN CrossSubnet: same subnet direct, other subnet encapsulated",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "CrossSubnet")}, threeNodes()), Blocks: threeBlocks()},
		want: Desired{VXLAN: vtep, Pools: pools, Neighbors: vxlanNeigh, FDB: vxlanFDB, Routes: []Route{
			{Dst: pfx("10.70.1.0/26"), Gw: a("172.30.1.11"), Node: "n1"},
			{Dst: pfx("10.70.2.0/26"), Gw: a("10.70.2.1"), Dev: VXLANDevice, OnLink: true, Node: "n2"},
		}},
	}, {
		name: "IPIP Always: tunl0 onlink via the node's address",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Always", "Never")}, threeNodes()), Blocks: threeBlocks()},
		want: Desired{IPIP: a("10.70.0.2"), Pools: pools, Routes: []Route{
			{Dst: pfx("10.70.1.0/26"), Gw: a("172.30.1.11"), Dev: IPIPDevice, OnLink: true, Node: "n1"},
			{Dst: pfx("10.70.2.0/26"), Gw: a("172.30.2.12"), Dev: IPIPDevice, OnLink: true, Node: "n2"},
		}},
	}, {
		name: "IPIP CrossSubnet",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "CrossSubnet", "")}, threeNodes()), Blocks: threeBlocks()},
		want: Desired{IPIP: a("10.70.0.2"), Pools: pools, Routes: []Route{
			{Dst: pfx("10.70.1.0/26"), Gw: a("172.30.1.11"), Node: "n1"},
			{Dst: pfx("10.70.2.0/26"), Gw: a("172.30.2.12"), Dev: IPIPDevice, OnLink: true, Node: "n2"},
		}},
	}, {
		name: "Never: BGP's job, no routes, no devices",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Never")}, threeNodes()), Blocks: threeBlocks()},
		want: Desired{Pools: pools},
	}, {
		name: "a deleted node's block loses its route, its VTEP its entries",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}, threeNodes()[:2]), Blocks: threeBlocks()},
		want: Desired{VXLAN: vtep, Pools: pools, Neighbors: vxlanNeigh[:1], FDB: vxlanFDB[:1], Routes: []Route{
			{Dst: pfx("10.70.1.0/26"), Gw: a("10.70.1.1"), Dev: VXLANDevice, OnLink: true, Node: "n1"},
		}},
	}, {
		name: "blocks outside every pool and unaffine blocks get no route",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Always", "")}, threeNodes()), Blocks: []*v3.IPAMBlock{block("10.99.0.0/26", "n1"), {Spec: v3.IPAMBlockSpec{CIDR: "10.70.5.0/26"}}}},
		want: Desired{IPIP: a("10.70.0.2"), Pools: pools},
	}, {
		name: "no VTEP address for this node yet: no device, no VXLAN routes, reported",
		in:   Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}, []*v3.Node{node("n0", "172.30.1.10/24", "", "", ""), threeNodes()[1]}), Blocks: threeBlocks()},
		want: Desired{Pools: pools}, probs: 1,
	}, {
		name: "no Node for this node: no devices, no routes to other nodes (the Manager reports it)",
		in:   Input{ThisNode: "nX", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}, threeNodes()), Blocks: threeBlocks()},
		want: Desired{Pools: pools},
	}, {
		name: "this node's Node has no address: its workloads keep their routes",
		in: Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")},
			[]*v3.Node{node("n0", "", "10.70.0.1", macA, ""), threeNodes()[1]}), Blocks: threeBlocks(),
			Workloads: []*v3.WorkloadEndpoint{wep("a", "cali1", "10.70.0.5/32"), wep("b", "cali2", "10.70.0.6")}},
		want: Desired{Pools: pools, Routes: []Route{
			{Dst: pfx("10.70.0.5/32"), Dev: "cali1", Workload: true, Node: "n0"},
			{Dst: pfx("10.70.0.6/32"), Dev: "cali2", Workload: true, Node: "n0"},
		}},
	}, {
		name: "this node's address is bare: /32, so every other node is off its subnet (CrossSubnet encapsulates)",
		in: Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "CrossSubnet")},
			[]*v3.Node{node("n0", "172.30.1.10", "10.70.0.1", macA, ""), threeNodes()[1], node("n2", "172.30.2.12", "10.70.2.1", macC, "")}),
			Blocks: threeBlocks()},
		want: Desired{VXLAN: vtep, Pools: pools, Neighbors: vxlanNeigh, FDB: vxlanFDB, Routes: []Route{
			{Dst: pfx("10.70.1.0/26"), Gw: a("10.70.1.1"), Dev: VXLANDevice, OnLink: true, Node: "n1"},
			{Dst: pfx("10.70.2.0/26"), Gw: a("10.70.2.1"), Dev: VXLANDevice, OnLink: true, Node: "n2"},
		}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, probs := Compute(tc.in)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
				t.Errorf("Compute (-want +got):\n%s", diff)
			}
			if len(probs) != tc.probs {
				t.Errorf("problems %v, want %d", probs, tc.probs)
			}
		})
	}
}

func TestDefaultVTEPMACIsStableAndLocal(t *testing.T) {
	m := infra.DefaultVTEPMAC("node-1")
	if m.String() != infra.DefaultVTEPMAC("node-1").String() || m[0]&1 != 0 || m[0]&2 == 0 {
		t.Errorf("DefaultVTEPMAC = %s: want stable, unicast, locally administered", m)
	}
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// TestComputeIPv6VXLAN: an IPv6 VXLAN pool gives vxlan-v6.calico routes,
// NDP and FDB entries (with the nodes' IPv6 addresses and v6 VTEPs),
// alongside an IPv4 pool that stays Never.
func TestComputeIPv6VXLAN(t *testing.T) {
	nodes := threeNodes()
	for i, n := range nodes {
		n.Spec.BGP.IPv6Address = []string{"fd00:30:1::10/64", "fd00:30:1::11/64", "fd00:30:2::12/64"}[i]
		n.Spec.IPv6VXLANTunnelAddr = []string{"fd00:70::1", "fd00:70:0:1::1", "fd00:70:0:2::1"}[i]
	}
	nodes[1].Spec.VXLANTunnelMACAddrV6 = "66:00:00:00:06:0b"
	aff := func(n string) *string { s := "host:" + n; return &s }
	blocks := append(threeBlocks(),
		&v3.IPAMBlock{Spec: v3.IPAMBlockSpec{CIDR: "fd00:70:0:1::/122", Affinity: aff("n1")}},
		&v3.IPAMBlock{Spec: v3.IPAMBlockSpec{CIDR: "fd00:70:0:2::/122", Affinity: aff("n2")}})
	got, probs := Compute(Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{
		ippool("10.70.0.0/16", "Never", "Never"), ippool("fd00:70::/48", "", "CrossSubnet")}, nodes), Blocks: blocks})
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	mac2 := infra.DefaultVTEPMAC("v6/n2").String()
	want := Desired{
		VXLANv6: &VTEP{Addr: a("fd00:70::1"), MAC: infra.DefaultVTEPMAC("v6/n0"), Parent: a("fd00:30:1::10")},
		Pools:   []netip.Prefix{pfx("10.70.0.0/16"), pfx("fd00:70::/48")},
		Routes: []Route{
			{Dst: pfx("fd00:70:0:1::/122"), Gw: a("fd00:30:1::11"), Node: "n1"},
			{Dst: pfx("fd00:70:0:2::/122"), Gw: a("fd00:70:0:2::1"), Dev: VXLANDeviceV6, OnLink: true, Node: "n2"},
		},
		Neighbors: []Neighbor{{Dev: VXLANDeviceV6, IP: a("fd00:70:0:1::1"), MAC: "66:00:00:00:06:0b"}, {Dev: VXLANDeviceV6, IP: a("fd00:70:0:2::1"), MAC: mac2}},
		FDB:       []FDBEntry{{Dev: VXLANDeviceV6, MAC: "66:00:00:00:06:0b", Dst: a("fd00:30:1::11")}, {Dev: VXLANDeviceV6, MAC: mac2, Dst: a("fd00:30:2::12")}},
	}
	if mac2 < "66:00:00:00:06:0b" {
		want.FDB[0], want.FDB[1] = want.FDB[1], want.FDB[0]
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })); diff != "" {
		t.Errorf("Compute (-want +got):\n%s", diff)
	}
}

// TestComputeBorrowedAddresses: an address of node0's block used on node2
// (borrowed, as IPAM does when node2 can claim no block) gets a host route
// to node2 on every other node -- node0 included -- while node2 itself
// leaves it to the CNI; an unaffine block's allocations are routed the
// same way.
func TestComputeBorrowedAddresses(t *testing.T) {
	idx := func(i int) *int { return &i }
	blk := block("10.70.0.0/26", "n0")
	blk.Spec.Allocations = make([]*int, 64)
	blk.Spec.Allocations[1] = idx(0) // n0's own
	blk.Spec.Allocations[5] = idx(1) // borrowed by n2
	blk.Spec.Attributes = []v3.AllocationAttribute{{ActiveOwnerAttrs: map[string]string{"node": "n0"}}, {ActiveOwnerAttrs: map[string]string{"node": "n2"}}}
	unaffine := &v3.IPAMBlock{Spec: v3.IPAMBlockSpec{CIDR: "10.70.9.0/26", Allocations: []*int{idx(0)},
		Attributes: []v3.AllocationAttribute{{ActiveOwnerAttrs: map[string]string{"node": "n1"}}}}}
	pools := []*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}
	routesOf := func(node string) []string {
		d, _ := Compute(Input{ThisNode: node, Cluster: infra.Derive(pools, threeNodes()), Blocks: []*v3.IPAMBlock{blk, unaffine}})
		var out []string
		for _, r := range d.Routes {
			out = append(out, r.Dst.String()+" via "+r.Gw.String())
		}
		return out
	}
	for node, want := range map[string][]string{
		"n0": {"10.70.0.5/32 via 10.70.2.1", "10.70.9.0/32 via 10.70.1.1"},
		"n1": {"10.70.0.0/26 via 10.70.0.1", "10.70.0.5/32 via 10.70.2.1"},
		"n2": {"10.70.0.0/26 via 10.70.0.1", "10.70.9.0/32 via 10.70.1.1"},
	} {
		if diff := cmp.Diff(want, routesOf(node)); diff != "" {
			t.Errorf("routes on %s (-want +got):\n%s", node, diff)
		}
	}
}
