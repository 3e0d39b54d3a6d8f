package wireguard

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/ipam"
)

var pfx = netip.MustParsePrefix

// key is a fixed public key per seed byte.
func key(b byte) wgtypes.Key {
	var k wgtypes.Key
	k[0], k[31] = b, 0x40
	return k
}

// node is a Node at addr (v4) with tunnel address vtep, WireGuard
// address wg and public key k (0: none).
func node(name, addr, vtep, wg string, k byte) *v3.Node {
	n := &v3.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.NodeSpec{
		BGP: &v3.NodeBGPSpec{IPv4Address: addr}, IPv4VXLANTunnelAddr: vtep}}
	if wg != "" {
		n.Spec.Wireguard = &v3.NodeWireguardSpec{InterfaceIPv4Address: wg}
	}
	if k != 0 {
		n.Status = &v3.NodeStatus{WireguardPublicKey: key(k).String()}
	}
	return n
}

func block(cidr, node string) *v3.IPAMBlock {
	aff := "host:" + node
	return &v3.IPAMBlock{ObjectMeta: metav1.ObjectMeta{Name: cidr}, Spec: v3.IPAMBlockSpec{CIDR: cidr, Affinity: &aff}}
}

// borrowed marks ordinal o of b as used by owner.
func borrowed(b *v3.IPAMBlock, o int, owner string) *v3.IPAMBlock {
	b.Spec.Allocations = make([]*int, o+1)
	zero := 0
	b.Spec.Allocations[o] = &zero
	b.Spec.Attributes = []v3.AllocationAttribute{{ActiveOwnerAttrs: map[string]string{ipam.AttrNode: owner}}}
	return b
}

var pools = []*v3.IPPool{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v3.IPPoolSpec{CIDR: "10.70.0.0/16", VXLANMode: v3.VXLANModeAlways}}}

func enabled() Config { c := DefaultConfig(false); c.Enabled = true; return c }

func threeNodes() []*v3.Node {
	return []*v3.Node{
		node("n0", "172.30.1.10/24", "10.70.0.1", "10.70.0.2", 1),
		node("n1", "172.30.1.11/24", "10.70.1.1", "10.70.1.2", 2),
		node("n2", "172.30.2.12/24", "10.70.2.1", "", 3),
	}
}

func threeBlocks() []*v3.IPAMBlock {
	return []*v3.IPAMBlock{block("10.70.0.0/26", "n0"), block("10.70.1.0/26", "n1"), block("10.70.2.0/26", "n2")}
}

func compute(t *testing.T, cfg Config, nodes []*v3.Node, blocks []*v3.IPAMBlock) (Desired, []Problem) {
	t.Helper()
	return Compute(cfg, Input{ThisNode: "n0", Cluster: infra.Derive(pools, nodes), Blocks: blocks})
}

func peer(n string, k byte, ep string, allowed ...string) Peer {
	p := Peer{Node: n, PublicKey: key(k), Endpoint: netip.MustParseAddrPort(ep)}
	for _, a := range allowed {
		p.AllowedIPs = append(p.AllowedIPs, pfx(a))
	}
	return p
}

func TestCompute(t *testing.T) {
	dev := func(dst, n string) Route { return Route{Dst: pfx(dst), Kind: ViaDevice, Node: n} }
	throw := func(dst, n string) Route { return Route{Dst: pfx(dst), Kind: Throw, Node: n} }
	n1 := peer("n1", 2, "172.30.1.11:51820", "10.70.1.0/26", "10.70.1.1/32", "10.70.1.2/32")
	n2 := peer("n2", 3, "172.30.2.12:51820", "10.70.2.0/26", "10.70.2.1/32")
	mine := []Route{throw("10.70.0.0/26", "n0"), throw("10.70.0.1/32", "n0"), throw("10.70.0.2/32", "n0")}
	tests := []struct {
		name   string
		cfg    func(*Config)
		nodes  func([]*v3.Node) []*v3.Node
		blocks []*v3.IPAMBlock
		want   Desired
		probs  int
	}{{
		name: "disabled", cfg: func(c *Config) { c.Enabled = false }, want: Desired{},
	}, {
		name: "every keyed node peered, own destinations thrown",
		want: Desired{Addr: netip.MustParseAddr("10.70.0.2"), Peers: []Peer{n1, n2},
			Routes: append(mine, dev("10.70.1.0/26", "n1"), dev("10.70.1.1/32", "n1"), dev("10.70.1.2/32", "n1"),
				dev("10.70.2.0/26", "n2"), dev("10.70.2.1/32", "n2"))},
	}, {
		name:  "a node without a key is thrown (clear, as Calico)",
		nodes: func(ns []*v3.Node) []*v3.Node { ns[2].Status = nil; return ns },
		want: Desired{Addr: netip.MustParseAddr("10.70.0.2"), Peers: []Peer{n1},
			Routes: append(mine, dev("10.70.1.0/26", "n1"), dev("10.70.1.1/32", "n1"), dev("10.70.1.2/32", "n1"),
				throw("10.70.2.0/26", "n2"), throw("10.70.2.1/32", "n2"))},
	}, {
		name: "two nodes with one key: neither peered",
		nodes: func(ns []*v3.Node) []*v3.Node {
			ns[2].Status.WireguardPublicKey = key(2).String()
			return ns
		},
		want: Desired{Addr: netip.MustParseAddr("10.70.0.2"),
			Routes: append(mine, throw("10.70.1.0/26", "n1"), throw("10.70.1.1/32", "n1"), throw("10.70.1.2/32", "n1"),
				throw("10.70.2.0/26", "n2"), throw("10.70.2.1/32", "n2"))},
		probs: 2,
	}, {
		name:   "borrowed address goes to its user; blocks outside pools ignored",
		blocks: append(threeBlocks(), borrowed(block("10.70.3.0/26", "n1"), 5, "n2"), block("192.168.9.0/26", "n1")),
		want: Desired{Addr: netip.MustParseAddr("10.70.0.2"),
			Peers: []Peer{peer("n1", 2, "172.30.1.11:51820", "10.70.1.0/26", "10.70.1.1/32", "10.70.1.2/32", "10.70.3.0/26"),
				peer("n2", 3, "172.30.2.12:51820", "10.70.2.0/26", "10.70.2.1/32", "10.70.3.5/32")},
			Routes: append(mine, dev("10.70.1.0/26", "n1"), dev("10.70.1.1/32", "n1"), dev("10.70.1.2/32", "n1"),
				dev("10.70.2.0/26", "n2"), dev("10.70.2.1/32", "n2"), dev("10.70.3.0/26", "n1"), dev("10.70.3.5/32", "n2"))},
	}, {
		name: "host encryption adds the nodes' own addresses",
		cfg:  func(c *Config) { c.EncryptHostTraffic = true; c.ListenPort = 5555 },
		want: Desired{Addr: netip.MustParseAddr("10.70.0.2"),
			Peers: []Peer{peer("n1", 2, "172.30.1.11:5555", "10.70.1.0/26", "10.70.1.1/32", "10.70.1.2/32", "172.30.1.11/32"),
				peer("n2", 3, "172.30.2.12:5555", "10.70.2.0/26", "10.70.2.1/32", "172.30.2.12/32")},
			Routes: append(mine, dev("10.70.1.0/26", "n1"), dev("10.70.1.1/32", "n1"), dev("10.70.1.2/32", "n1"),
				dev("10.70.2.0/26", "n2"), dev("10.70.2.1/32", "n2"), Route{Dst: pfx("172.30.1.10/32"), Kind: Throw, Node: "n0", Host: true},
				Route{Dst: pfx("172.30.1.11/32"), Kind: ViaDevice, Node: "n1", Host: true},
				Route{Dst: pfx("172.30.2.12/32"), Kind: ViaDevice, Node: "n2", Host: true})},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := enabled()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			nodes := threeNodes()
			if tc.nodes != nil {
				nodes = tc.nodes(nodes)
			}
			blocks := tc.blocks
			if blocks == nil {
				blocks = threeBlocks()
			}
			got, probs := compute(t, cfg, nodes, blocks)
			tc.want.Config = cfg
			sortRoutes(tc.want.Routes)
			if !cfg.Enabled {
				tc.want = Desired{Config: cfg}
			}
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
				t.Errorf("Compute (-want +got):\n%s", d)
			}
			if len(probs) != tc.probs {
				t.Errorf("problems %v, want %d", probs, tc.probs)
			}
		})
	}
}

// device is what a kernel would hold after applying d to an empty device
// (the oracle the plans are checked against).
func device(d Desired) *wgtypes.Device {
	dev := &wgtypes.Device{ListenPort: d.Config.ListenPort, FirewallMark: d.Config.FirewallMark, PrivateKey: key(9)}
	for _, p := range d.Peers {
		dev.Peers = append(dev.Peers, wgtypes.Peer{PublicKey: p.PublicKey, Endpoint: net.UDPAddrFromAddrPort(p.Endpoint),
			AllowedIPs: ipNets(p.AllowedIPs), PersistentKeepaliveInterval: d.Config.KeepAlive})
	}
	return dev
}

// applyPlan is the kernel's reading of a plan over dev.
func applyPlan(dev *wgtypes.Device, p PeerPlan) *wgtypes.Device {
	out := *dev
	out.Peers = nil
	changed := map[wgtypes.Key]wgtypes.PeerConfig{}
	for _, pc := range p.Config.Peers {
		changed[pc.PublicKey] = pc
	}
	for _, hp := range dev.Peers {
		if _, ok := changed[hp.PublicKey]; !ok {
			out.Peers = append(out.Peers, hp)
		}
	}
	for _, pc := range p.Config.Peers {
		if !pc.Remove {
			out.Peers = append(out.Peers, wgtypes.Peer{PublicKey: pc.PublicKey, Endpoint: pc.Endpoint, AllowedIPs: pc.AllowedIPs,
				PersistentKeepaliveInterval: *pc.PersistentKeepaliveInterval})
		}
	}
	if p.Config.ListenPort != nil {
		out.ListenPort = *p.Config.ListenPort
	}
	if p.Config.FirewallMark != nil {
		out.FirewallMark = *p.Config.FirewallMark
	}
	return &out
}

// TestIncrementalPeers: each change touches only the peers it concerns,
// and the plan brings the device to the new desired state.
func TestIncrementalPeers(t *testing.T) {
	base := threeNodes()
	steps := []struct {
		name                   string
		nodes                  []*v3.Node
		blocks                 []*v3.IPAMBlock
		added, updated, remove int
	}{
		{name: "node added", nodes: append(threeNodes(), node("n3", "172.30.2.13/24", "", "", 4)),
			blocks: append(threeBlocks(), block("10.70.4.0/26", "n3")), added: 1},
		{name: "node removed", nodes: threeNodes()[:2], blocks: threeBlocks()[:2], remove: 1},
		{name: "key changed", nodes: func() []*v3.Node {
			ns := threeNodes()
			ns[1].Status.WireguardPublicKey = key(7).String()
			return ns
		}(), blocks: threeBlocks(), added: 1, remove: 1},
		{name: "block moved", nodes: threeNodes(),
			blocks: []*v3.IPAMBlock{block("10.70.0.0/26", "n0"), block("10.70.1.0/26", "n2"), block("10.70.2.0/26", "n2")}, updated: 2},
		{name: "endpoint moved", nodes: func() []*v3.Node {
			ns := threeNodes()
			ns[2].Spec.BGP.IPv4Address = "172.30.3.12/24"
			return ns
		}(), blocks: threeBlocks(), updated: 1},
		{name: "nothing changed", nodes: threeNodes(), blocks: threeBlocks()},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			before, _ := compute(t, enabled(), base, threeBlocks())
			after, _ := compute(t, enabled(), s.nodes, s.blocks)
			dev := device(before)
			p := PlanPeers(after, dev)
			if p.Added != s.added || p.Updated != s.updated || p.Removed != s.remove || p.NeedKey {
				t.Errorf("plan added %d updated %d removed %d needKey %v, want %d %d %d false",
					p.Added, p.Updated, p.Removed, p.NeedKey, s.added, s.updated, s.remove)
			}
			if again := PlanPeers(after, applyPlan(dev, p)); !again.Empty() {
				t.Errorf("after applying the plan, still to do: %+v", again)
			}
			if p.Empty() != (s.added+s.updated+s.remove == 0) {
				t.Errorf("Empty() = %v", p.Empty())
			}
		})
	}
}

func TestPlanPeersDeviceSettings(t *testing.T) {
	cfg := enabled()
	cfg.KeepAlive = 25 * time.Second
	d, _ := compute(t, cfg, threeNodes(), threeBlocks())
	p := PlanPeers(d, &wgtypes.Device{})
	if !p.NeedKey || p.Config.ListenPort == nil || *p.Config.ListenPort != 51820 || p.Config.FirewallMark == nil || *p.Config.FirewallMark != Mark || p.Added != 2 {
		t.Fatalf("plan on an empty device: %+v", p)
	}
	for _, pc := range p.Config.Peers {
		if *pc.PersistentKeepaliveInterval != 25*time.Second || !pc.ReplaceAllowedIPs {
			t.Errorf("peer %v: keepalive %v replace %v", pc.PublicKey, *pc.PersistentKeepaliveInterval, pc.ReplaceAllowedIPs)
		}
	}
	dev := device(d)
	cfg.KeepAlive = 0
	d.Config = cfg
	if p := PlanPeers(d, dev); p.Updated != 2 {
		t.Errorf("keep-alive change updates %d peers, want 2", p.Updated)
	}
}

func TestPlanRoutesAndFailClosed(t *testing.T) {
	d, _ := compute(t, enabled(), threeNodes(), threeBlocks())
	fc := FailClosed(d, "n0")
	if len(fc.Peers) != 0 || len(fc.Routes) != len(d.Routes) {
		t.Fatalf("FailClosed: %+v", fc)
	}
	for _, r := range fc.Routes {
		if want := map[bool]RouteKind{true: Throw, false: Blackhole}[r.Node == "n0"]; r.Kind != want {
			t.Errorf("fail closed %s of %s: %v, want %v", r.Dst, r.Node, r.Kind, want)
		}
	}
	add, del := PlanRoutes(fc.Routes, d.Routes)
	if len(add) != 5 || len(del) != 5 {
		t.Errorf("switching to fail-closed: add %d del %d, want 5 5", len(add), len(del))
	}
	if add, del := PlanRoutes(d.Routes, d.Routes); len(add)+len(del) != 0 {
		t.Errorf("no change planned %v %v", add, del)
	}
	add, del = PlanRoutes(d.Routes[:3], d.Routes)
	if len(add) != 0 || len(del) != len(d.Routes)-3 {
		t.Errorf("removal: add %v del %v", add, del)
	}
	// Host encryption: other nodes' own addresses stay thrown.
	cfg := enabled()
	cfg.EncryptHostTraffic = true
	d, _ = compute(t, cfg, threeNodes(), threeBlocks())
	for _, r := range FailClosed(d, "n0").Routes {
		if r.Host && r.Kind != Throw {
			t.Errorf("host address %s: %v", r.Dst, r.Kind)
		}
	}
}
