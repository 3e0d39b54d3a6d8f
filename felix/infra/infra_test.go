package infra

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func node(name string, spec v3.NodeSpec) *v3.Node {
	return &v3.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func pool(name, cidr string, ipip v3.IPIPMode, vxlan v3.VXLANMode, nat bool) *v3.IPPool {
	return &v3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v3.IPPoolSpec{CIDR: cidr, IPIPMode: ipip, VXLANMode: vxlan, NATOutgoing: nat}}
}

// TestNodeAddressForms: every form Calico's ParseCIDROrIP accepts is
// read, with the subnet length it implies; everything else is a Problem
// naming the field, and the node keeps its other fields.
func TestNodeAddressForms(t *testing.T) {
	for _, tc := range []struct {
		name, v4, v6 string
		want4, want6 string // "" = invalid
		problem      string // the field reported, "" = none
	}{
		{name: "cidr", v4: "10.0.0.2/24", want4: "10.0.0.2/24"},
		{name: "bare ip", v4: "10.0.0.2", want4: "10.0.0.2/32"},
		{name: "cidr host route", v4: "10.0.0.2/32", want4: "10.0.0.2/32"},
		{name: "ipv4-mapped bare", v4: "::ffff:10.0.0.2", want4: "10.0.0.2/32"},
		{name: "ipv4-mapped cidr", v4: "::ffff:10.0.0.2/120", want4: "10.0.0.2/24"},
		{name: "ipv6 cidr", v6: "fd00::2/64", want6: "fd00::2/64"},
		{name: "ipv6 bare", v6: "fd00::2", want6: "fd00::2/128"},
		{name: "both", v4: "10.0.0.2", v6: "fd00::2/64", want4: "10.0.0.2/32", want6: "fd00::2/64"},
		{name: "none"},
		{name: "garbage", v4: "ten.zero", problem: "bgp.ipv4Address"},
		{name: "bad prefix length", v4: "10.0.0.2/33", problem: "bgp.ipv4Address"},
		{name: "leading zeros", v4: "010.000.000.002", problem: "bgp.ipv4Address"},
		{name: "zone", v6: "fe80::1%eth0", problem: "bgp.ipv6Address"},
		{name: "ipv6 in the ipv4 field", v4: "fd00::2", problem: "bgp.ipv4Address"},
		{name: "ipv4 in the ipv6 field", v4: "10.0.0.2", v6: "10.0.0.3", want4: "10.0.0.2/32", problem: "bgp.ipv6Address"},
		{name: "mapped with a short prefix", v4: "::ffff:10.0.0.2/8", problem: "bgp.ipv4Address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Derive(nil, []*v3.Node{node("n1", v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: tc.v4, IPv6Address: tc.v6},
				IPv4VXLANTunnelAddr: "10.244.0.1"})})
			n, ok := c.Node("n1")
			if !ok {
				t.Fatal("node left out")
			}
			if got := prefixString(n.V4.Addr); got != tc.want4 {
				t.Errorf("v4 address %q, want %q", got, tc.want4)
			}
			if got := prefixString(n.V6.Addr); got != tc.want6 {
				t.Errorf("v6 address %q, want %q", got, tc.want6)
			}
			if n.V4.VTEP != netip.MustParseAddr("10.244.0.1") {
				t.Errorf("VTEP %v: the rest of the node must be kept", n.V4.VTEP)
			}
			var fields []string
			for _, p := range c.Problems {
				fields = append(fields, p.Field)
			}
			var want []string
			if tc.problem != "" {
				want = []string{tc.problem}
			}
			if diff := cmp.Diff(want, fields); diff != "" {
				t.Errorf("problems (-want +got):\n%s\n%v", diff, c.Problems)
			}
			// The all-hosts set holds exactly the addresses read.
			var hosts []netip.Addr
			for _, s := range []string{tc.want4, tc.want6} {
				if s != "" {
					hosts = append(hosts, netip.MustParsePrefix(s).Addr())
				}
			}
			if diff := cmp.Diff(hosts, c.AllHosts(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("all hosts (-want +got):\n%s", diff)
			}
		})
	}
}

func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

// TestTunnelFields: tunnel addresses and MACs, also in the mapped form;
// a bad field is reported and left out (a bad MAC takes its VTEP with
// it), the rest of the node is kept.
func TestTunnelFields(t *testing.T) {
	mac := "66:00:00:00:00:01"
	c := Derive(nil, []*v3.Node{
		node("a", v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "10.0.0.1/24", IPv4IPIPTunnelAddr: "::ffff:10.245.0.1"},
			IPv4VXLANTunnelAddr: "10.244.0.1", VXLANTunnelMACAddr: mac, IPv6VXLANTunnelAddr: "fd01::1"}),
		node("b", v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "10.0.0.2", IPv4IPIPTunnelAddr: "nope"},
			IPv4VXLANTunnelAddr: "10.244.0.2", VXLANTunnelMACAddr: "not-a-mac", IPv6VXLANTunnelAddr: "10.1.1.1"}),
	})
	a, b := c.Nodes["a"], c.Nodes["b"]
	if a.IPIPAddr != netip.MustParseAddr("10.245.0.1") || a.V4.VTEP != netip.MustParseAddr("10.244.0.1") ||
		a.V4.VTEPMAC.String() != mac || a.V6.VTEP != netip.MustParseAddr("fd01::1") ||
		a.V6.VTEPMAC.String() != DefaultVTEPMAC("v6/a").String() {
		t.Errorf("node a read as %+v", a)
	}
	if b.IPIPAddr.IsValid() || b.V4.VTEP.IsValid() || b.V4.VTEPMAC != nil || b.V6.VTEP.IsValid() ||
		b.V4.Addr != netip.MustParsePrefix("10.0.0.2/32") {
		t.Errorf("node b read as %+v", b)
	}
	var got []string
	for _, p := range c.Problems {
		got = append(got, p.Name+" "+p.Field)
	}
	want := []string{"b bgp.ipv4IPIPTunnelAddr", "b ipv6VXLANTunnelAddr", "b vxlanTunnelMACAddr"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	// Only a, with a VTEP, is a VXLAN host; both are hosts.
	if diff := cmp.Diff([]string{"10.0.0.1"}, strs(c.VXLANHosts())); diff != "" {
		t.Errorf("VXLAN hosts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"10.0.0.1", "10.0.0.2"}, strs(c.AllHosts())); diff != "" {
		t.Errorf("all hosts (-want +got):\n%s", diff)
	}
}

func strs(a []netip.Addr) []string {
	var out []string
	for _, x := range a {
		out = append(out, x.String())
	}
	return out
}

// TestPools: pools sorted by CIDR and masked, IPIP dropped for IPv6,
// encapsulation and NAT as written, a bad CIDR reported and left out.
func TestPools(t *testing.T) {
	c := Derive([]*v3.IPPool{
		pool("v6", "fd00:10::5/64", v3.IPIPModeAlways, v3.VXLANModeCrossSubnet, true),
		pool("b", "10.1.0.0/16", v3.IPIPModeCrossSubnet, v3.VXLANModeNever, false),
		pool("a", "10.0.0.7/16", v3.IPIPModeNever, v3.VXLANModeAlways, true),
		pool("bad", "10.0.0.0/99", v3.IPIPModeAlways, "", false),
	}, nil)
	want := []Pool{
		{Name: "a", CIDR: netip.MustParsePrefix("10.0.0.0/16"), IPIP: v3.IPIPModeNever, VXLAN: v3.VXLANModeAlways, NATOutgoing: true},
		{Name: "b", CIDR: netip.MustParsePrefix("10.1.0.0/16"), IPIP: v3.IPIPModeCrossSubnet, VXLAN: v3.VXLANModeNever},
		{Name: "v6", CIDR: netip.MustParsePrefix("fd00:10::/64"), VXLAN: v3.VXLANModeCrossSubnet, NATOutgoing: true},
	}
	if diff := cmp.Diff(want, c.Pools, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	if len(c.Problems) != 1 || c.Problems[0].Name != "bad" || c.Problems[0].Field != "cidr" {
		t.Errorf("problems %v, want the bad pool's cidr", c.Problems)
	}
	v4, v6 := false, true
	if !c.UsesIPIP() || !c.UsesVXLAN(&v4) || !c.UsesVXLAN(&v6) || !c.UsesVXLAN(nil) {
		t.Error("encapsulation in use not seen")
	}
	if p, ok := c.PoolOf(netip.MustParsePrefix("10.1.2.0/26")); !ok || p.Name != "b" {
		t.Errorf("PoolOf(10.1.2.0/26) = %v, %v", p, ok)
	}
	if _, ok := c.PoolOf(netip.MustParsePrefix("10.0.0.0/8")); ok {
		t.Error("a block larger than every pool has no pool")
	}
}

// TestDeriveIsOrderIndependent: the same objects in another order give
// the same Cluster.
func TestDeriveIsOrderIndependent(t *testing.T) {
	pools := []*v3.IPPool{pool("a", "10.0.0.0/16", "", v3.VXLANModeAlways, false), pool("b", "bad", "", "", false)}
	nodes := []*v3.Node{
		node("x", v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "bad"}}),
		node("y", v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "10.0.0.9"}}),
	}
	a := Derive(pools, nodes)
	b := Derive([]*v3.IPPool{pools[1], pools[0]}, []*v3.Node{nodes[1], nodes[0]})
	if diff := cmp.Diff(a, b, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("order changed the result (-a +b):\n%s", diff)
	}
}
