//go:build privileged

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/ifacewatch"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// hostNet is a node namespace with one peer namespace per host
// interface (eth1 -> 192.168.51.x, eth2 -> 192.168.52.x, ...), each peer
// routing the pod network (10.65.0.0/16) through the node; and a
// dataplane programming the node.
type hostNet struct {
	mode   string // dataplaneModes
	node   ns.NetNS
	peers  []ns.NetNS
	run    dataplane.ExecRunner
	dp     *dataplane.Dataplane
	always []any // objects every apply includes
}

func nodeIPOn(i int) string { return fmt.Sprintf("192.168.%d.1", 51+i) }
func peerIPOn(i int) string { return fmt.Sprintf("192.168.%d.2", 51+i) }

func newHostNet(t *testing.T, mode string, nIfaces int) *hostNet {
	t.Helper()
	h := &hostNet{mode: mode, node: newNode(t)}
	h.run = dataplane.ExecRunner{NetnsPath: h.node.Path()}
	for i := range nIfaces {
		peer := netnstest.New(t)
		iface, peerIface := fmt.Sprintf("eth%d", i+1), fmt.Sprintf("peer%d", i)
		err := h.node.Do(func(ns.NetNS) error {
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: iface}, PeerName: peerIface}); err != nil {
				return err
			}
			p, err := netlink.LinkByName(peerIface)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetNsFd(p, int(peer.Fd())); err != nil {
				return err
			}
			return upWithAddr(iface, nodeIPOn(i)+"/24")
		})
		if err != nil {
			t.Fatal(err)
		}
		err = peer.Do(func(ns.NetNS) error {
			if err := upWithAddr(peerIface, peerIPOn(i)+"/24"); err != nil {
				return err
			}
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(lo); err != nil {
				return err
			}
			_, pods, _ := net.ParseCIDR("10.65.0.0/16")
			l, err := netlink.LinkByName(peerIface)
			if err != nil {
				return err
			}
			return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: pods, Gw: net.ParseIP(nodeIPOn(i))})
		})
		if err != nil {
			t.Fatal(err)
		}
		h.peers = append(h.peers, peer)
	}
	h.dp = newModeDataplane(t, mode, h.node.Path(), dataplane.Config{Runner: h.run, V4: dataplane.BackendDefaultV4})
	return h
}

// apply computes and programs h.always plus objs, with the node's real
// interface addresses (for host endpoints given by expectedIPs).
func (h *hostNet) apply(t *testing.T, objs ...any) {
	t.Helper()
	res := calc.Compute(ct.Input("node1", append(append([]any{}, h.always...), objs...)))
	if len(res.Problems) > 0 {
		t.Fatalf("problems: %v", res.Problems)
	}
	cfg := rules.DefaultConfig()
	ifaces, err := ifacewatch.Read(h.node.Path())
	if err != nil {
		t.Fatal(err)
	}
	cfg.HostInterfaces = ifaces
	h.dp.SetDesired(rules.Render(cfg, res, 4))
	if _, err := h.dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// save returns the node's iptables-save of table; in nftables mode the
// chains of felix's table that stand for it, in the same shape ("-A
// <chain> <rule>", jumps and gotos as "-j"/"-g <chain>"), so that the
// checks read the same in both modes.
func (h *hostNet) save(t *testing.T, table string) string {
	t.Helper()
	if h.mode != "nftables" {
		out, err := h.run.Run(context.Background(), "iptables-save", []string{"-t", table}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	out, err := h.run.Run(context.Background(), "nft", []string{"list", "table", "ip", rules.NftTable}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	chain := ""
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if name, ok := strings.CutPrefix(l, "chain "); ok {
			chain, _ = strings.CutPrefix(strings.TrimSuffix(name, " {"), table+"-")
			if chain == strings.TrimSuffix(name, " {") {
				chain = "" // another table's chain
			}
			continue
		}
		if l == "}" {
			chain = ""
		}
		if chain == "" || l == "" || strings.HasPrefix(l, "type ") {
			continue
		}
		l = strings.ReplaceAll(strings.ReplaceAll(l, "jump "+table+"-", "-j "), "goto "+table+"-", "-g ")
		fmt.Fprintf(&b, "-A %s %s\n", chain, l)
	}
	return b.String()
}

// serveUDP echoes datagrams on port in netns until the test ends.
func serveUDP(t *testing.T, netns ns.NetNS, port int) {
	t.Helper()
	var u net.PacketConn
	err := netns.Do(func(ns.NetNS) error {
		var err error
		u, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("listening on udp %d: %v", port, err)
	}
	t.Cleanup(func() { _ = u.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := u.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = u.WriteTo(buf[:n], from)
		}
	}()
}

// udpOK reports whether a datagram from netns to ip:port is echoed back.
func udpOK(netns ns.NetNS, ip string, port int) bool {
	ok := false
	_ = netns.Do(func(ns.NetNS) error {
		c, err := net.Dial("udp4", net.JoinHostPort(ip, fmt.Sprint(port)))
		if err != nil {
			return nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write([]byte("ping")); err != nil {
			return nil
		}
		buf := make([]byte, 16)
		n, err := c.Read(buf)
		ok = err == nil && string(buf[:n]) == "ping"
		return nil
	})
	return ok
}

func runChecks(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		if got := c.got(); got != c.want {
			t.Errorf("%s: connected=%v, want %v", c.desc, got, c.want)
		}
	}
}

func tcpRule(action v3.Action, ports ...string) v3.Rule {
	return v3.Rule{Action: action, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Ports: ct.Ports(ports...)}}
}

// TestPrivilegedApplyOnForward: a host endpoint on eth1 between a peer
// and a pod. A normal (not applyOnForward) deny-all policy closes the
// host but leaves forwarded traffic alone; an applyOnForward policy
// polices the traffic forwarded from eth1 to the pod: port A allowed,
// port B denied.
func TestPrivilegedApplyOnForward(t *testing.T) { forEachMode(t, testApplyOnForward) }

func testApplyOnForward(t *testing.T, mode string) {
	h := newHostNet(t, mode, 1)
	peer := h.peers[0]
	web := newPod(t, h.node, "web", "caliaaaa", "10.65.0.1")
	const hostApp = 8081
	listenTCP(t, h.node, hostApp)
	listenTCP(t, peer, tcpPortB)
	h.always = []any{
		ct.NSProfile("prod", nil),
		ct.WEP("prod", "web", "node1", "caliaaaa", "10.65.0.1", map[string]string{"app": "web"}),
		ct.HEP("node1-eth1", "node1", "eth1", map[string]string{"role": "node"}, nodeIPOn(0)),
	}
	webIP := web.ip.String()
	denyAll := ct.GNP("host-deny", "default", ct.Ptr(100.0), "role == 'node'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)

	t.Run("normal policy only: host closed, forwarding untouched", func(t *testing.T) {
		h.apply(t, denyAll)
		runChecks(t, []check{
			{"peer->node:8081 (host, denied)", func() bool { return dialOK(peer, nodeIPOn(0), hostApp) }, false},
			{"peer->pod:A (forwarded)", func() bool { return dialOK(peer, webIP, tcpPortA) }, true},
			{"peer->pod:B (forwarded)", func() bool { return dialOK(peer, webIP, tcpPortB) }, true},
		})
	})
	t.Run("applyOnForward policy: A allowed, B denied", func(t *testing.T) {
		fwd := ct.HostPolicy(ct.GNP("fwd-a", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress,
			[]v3.Rule{tcpRule(v3.Allow, fmt.Sprint(tcpPortA))}, nil), true, false, false)
		h.apply(t, denyAll, fwd)
		runChecks(t, []check{
			{"peer->pod:A", func() bool { return dialOK(peer, webIP, tcpPortA) }, true},
			{"peer->pod:B", func() bool { return dialOK(peer, webIP, tcpPortB) }, false},
			{"peer->node:8081 (host, denied)", func() bool { return dialOK(peer, nodeIPOn(0), hostApp) }, false},
			{"pod->peer:B (no applyOnForward egress policy: allowed)", func() bool { return dialOK(web.netns, peerIPOn(0), tcpPortB) }, true},
		})
		if s := h.save(t, "filter"); !strings.Contains(s, "-A cali-from-hep-forward") || !strings.Contains(s, "cali-fhfw-eth1") {
			t.Errorf("forward dispatch not programmed:\n%s", s)
		}
	})
}

// TestPrivilegedPreDNAT: the node DNATs eth1's port 8888 to the pod's port
// A. A preDNAT policy matching the pre-DNAT destination denies it; the
// same pod port reached directly is not affected. A preDNAT Allow is
// final for the filter table too: with an applyOnForward deny-all, the
// DNAT'd flow still passes while the direct one is dropped.
func TestPrivilegedPreDNAT(t *testing.T) { forEachMode(t, testPreDNAT) }

func testPreDNAT(t *testing.T, mode string) {
	h := newHostNet(t, mode, 1)
	peer := h.peers[0]
	web := newPod(t, h.node, "web", "caliaaaa", "10.65.0.1")
	nodeIP, webIP := nodeIPOn(0), web.ip.String()
	const dnatPort = 8888
	_, err := h.run.Run(context.Background(), "iptables", []string{"-t", "nat", "-A", "PREROUTING", "-i", "eth1",
		"-d", nodeIP, "-p", "tcp", "--dport", fmt.Sprint(dnatPort), "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", webIP, tcpPortA)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.always = []any{
		ct.NSProfile("prod", nil),
		ct.WEP("prod", "web", "node1", "caliaaaa", webIP, map[string]string{"app": "web"}),
		ct.HEP("node1-eth1", "node1", "eth1", map[string]string{"role": "node"}, nodeIP),
	}
	toDNAT := v3.EntityRule{Nets: []string{nodeIP + "/32"}, Ports: ct.Ports(fmt.Sprint(dnatPort))}

	t.Run("no policy: DNAT works", func(t *testing.T) {
		h.apply(t)
		runChecks(t, []check{
			{"peer->node:8888 (DNAT to pod:A)", func() bool { return dialOK(peer, nodeIP, dnatPort) }, true},
			{"peer->pod:A", func() bool { return dialOK(peer, webIP, tcpPortA) }, true},
		})
	})
	t.Run("preDNAT deny of the pre-DNAT destination", func(t *testing.T) {
		h.apply(t, ct.HostPolicy(ct.GNP("pre-deny", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress,
			[]v3.Rule{{Action: v3.Deny, Protocol: ct.Proto("TCP"), Destination: toDNAT}}, nil), false, true, false))
		runChecks(t, []check{
			{"peer->node:8888 (denied before DNAT)", func() bool { return dialOK(peer, nodeIP, dnatPort) }, false},
			{"peer->pod:A (other destination)", func() bool { return dialOK(peer, webIP, tcpPortA) }, true},
		})
		if s := h.save(t, "mangle"); !strings.Contains(s, "-A cali-fh-eth1") || !strings.Contains(s, "-j cali-PREROUTING") {
			t.Errorf("mangle not programmed:\n%s", s)
		}
	})
	t.Run("preDNAT allow is final; forward deny-all drops the rest", func(t *testing.T) {
		h.apply(t,
			ct.HostPolicy(ct.GNP("pre-allow", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress,
				[]v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP"), Destination: toDNAT}}, nil), false, true, false),
			ct.HostPolicy(ct.GNP("fwd-deny", "default", ct.Ptr(20.0), "role == 'node'", ct.Ingress,
				[]v3.Rule{{Action: v3.Deny}}, nil), true, false, false))
		runChecks(t, []check{
			{"peer->node:8888 (allowed in mangle)", func() bool { return dialOK(peer, nodeIP, dnatPort) }, true},
			{"peer->pod:A (forward policy denies)", func() bool { return dialOK(peer, webIP, tcpPortA) }, false},
		})
	})
	t.Run("policy removed: mangle chains cleaned up", func(t *testing.T) {
		h.apply(t)
		s := h.save(t, "mangle")
		if strings.Contains(s, "cali-fh-eth1") || strings.Contains(s, "cali-pi-") {
			t.Errorf("stale mangle chains:\n%s", s)
		}
		if !dialOK(peer, nodeIP, dnatPort) {
			t.Error("DNAT flow denied after the policies went")
		}
	})
}

// conntrackFlows counts the node's conntrack entries for UDP to port.
func (h *hostNet) conntrackFlows(t *testing.T, port int) int {
	t.Helper()
	out, err := h.run.Run(context.Background(), "conntrack", []string{"-L", "-p", "udp", "--dport", fmt.Sprint(port)}, nil)
	if err != nil {
		t.Fatalf("conntrack -L: %v", err)
	}
	return strings.Count(string(out), "dport="+fmt.Sprint(port))
}

// TestPrivilegedDoNotTrack: a host endpoint with a normal policy that
// allows UDP 7778 only, plus a doNotTrack policy allowing UDP 7777 in and
// its replies out. 7777 then works without any conntrack entry (the
// filter table accepts the untracked packets), while 7778's flow is
// tracked.
func TestPrivilegedDoNotTrack(t *testing.T) { forEachMode(t, testDoNotTrack) }

func testDoNotTrack(t *testing.T, mode string) {
	h := newHostNet(t, mode, 1)
	peer := h.peers[0]
	nodeIP := nodeIPOn(0)
	const untracked, tracked = 7777, 7778
	serveUDP(t, h.node, untracked)
	serveUDP(t, h.node, tracked)
	udpRule := func(side string, port int) v3.Rule {
		r := v3.Rule{Action: v3.Allow, Protocol: ct.Proto("UDP")}
		if side == "dst" {
			r.Destination.Ports = ct.Ports(fmt.Sprint(port))
		} else {
			r.Source.Ports = ct.Ports(fmt.Sprint(port))
		}
		return r
	}
	h.always = []any{
		ct.HEP("node1-eth1", "node1", "eth1", map[string]string{"role": "node"}, nodeIP),
		ct.GNP("normal", "default", ct.Ptr(100.0), "role == 'node'", ct.Ingress, []v3.Rule{udpRule("dst", tracked)}, nil),
	}
	t.Run("normal policy only", func(t *testing.T) {
		h.apply(t)
		runChecks(t, []check{
			{"peer->node udp 7777", func() bool { return udpOK(peer, nodeIP, untracked) }, false},
			{"peer->node udp 7778", func() bool { return udpOK(peer, nodeIP, tracked) }, true},
		})
		if n := h.conntrackFlows(t, tracked); n == 0 {
			t.Error("the tracked flow has no conntrack entry (the check could not tell)")
		}
	})
	t.Run("doNotTrack allows 7777 untracked", func(t *testing.T) {
		h.apply(t, ct.HostPolicy(ct.GNP("untracked", "default", ct.Ptr(10.0), "role == 'node'", ct.Both,
			[]v3.Rule{udpRule("dst", untracked)}, []v3.Rule{udpRule("src", untracked)}), false, false, true))
		runChecks(t, []check{
			{"peer->node udp 7777", func() bool { return udpOK(peer, nodeIP, untracked) }, true},
			{"peer->node udp 7778", func() bool { return udpOK(peer, nodeIP, tracked) }, true},
		})
		if n := h.conntrackFlows(t, untracked); n != 0 {
			t.Errorf("untracked flow has %d conntrack entries", n)
		}
		if n := h.conntrackFlows(t, tracked); n == 0 {
			t.Error("the tracked flow lost its conntrack entry")
		}
		s := h.save(t, "raw")
		for _, want := range []string{"-A cali-fh-eth1", "-A cali-th-eth1", "-A PREROUTING", "-A OUTPUT"} {
			if !strings.Contains(s, want) {
				t.Errorf("raw table lacks %q:\n%s", want, s)
			}
		}
	})
}

// TestPrivilegedAllInterfacesHostEndpoint: a "*" host endpoint's policy
// (TCP 8081 in; nothing out) applies to the host's traffic on every
// interface (eth1 and eth2 here), the failsafe ports stay open on all of
// them, and the loopback is left alone.
func TestPrivilegedAllInterfacesHostEndpoint(t *testing.T) {
	forEachMode(t, testAllInterfacesHostEndpoint)
}

func testAllInterfacesHostEndpoint(t *testing.T, mode string) {
	h := newHostNet(t, mode, 2)
	const ssh, app, other, peerAPI = 22, 8081, 9999, 6443
	for _, p := range []int{ssh, app, other} {
		listenTCP(t, h.node, p)
	}
	for _, peer := range h.peers {
		listenTCP(t, peer, peerAPI)
		listenTCP(t, peer, other)
	}
	h.always = []any{ct.HEP("node1-all", "node1", "*", map[string]string{"role": "node"})}
	h.apply(t, ct.GNP("host-in", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress,
		[]v3.Rule{tcpRule(v3.Allow, fmt.Sprint(app))}, nil))
	var checks []check
	for i, peer := range h.peers {
		nodeIP, peerIP := nodeIPOn(i), peerIPOn(i)
		checks = append(checks,
			check{fmt.Sprintf("peer%d->node:8081 (policy)", i), func() bool { return dialOK(peer, nodeIP, app) }, true},
			check{fmt.Sprintf("peer%d->node:9999", i), func() bool { return dialOK(peer, nodeIP, other) }, false},
			check{fmt.Sprintf("peer%d->node:22 (failsafe in)", i), func() bool { return dialOK(peer, nodeIP, ssh) }, true},
			check{fmt.Sprintf("node->peer%d:6443 (failsafe out)", i), func() bool { return dialOK(h.node, peerIP, peerAPI) }, true},
			check{fmt.Sprintf("node->peer%d:9999", i), func() bool { return dialOK(h.node, peerIP, other) }, false},
		)
	}
	checks = append(checks, check{"node->127.0.0.1:9999 (lo)", func() bool { return dialOK(h.node, "127.0.0.1", other) }, true})
	runChecks(t, checks)
}

// TestPrivilegedHostEndpointByExpectedIPs: a host endpoint with no
// interface name, only the IP of eth1, is resolved through the node's
// real interface addresses: eth1 is policed (failsafe still open), eth2
// is not.
func TestPrivilegedHostEndpointByExpectedIPs(t *testing.T) {
	forEachMode(t, testHostEndpointByExpectedIPs)
}

func testHostEndpointByExpectedIPs(t *testing.T, mode string) {
	h := newHostNet(t, mode, 2)
	const ssh, app = 22, 8081
	listenTCP(t, h.node, ssh)
	listenTCP(t, h.node, app)
	h.always = []any{ct.HEP("node1-by-ip", "node1", "", map[string]string{"role": "node"}, nodeIPOn(0))}
	h.apply(t)
	runChecks(t, []check{
		{"peer0->node:8081 via eth1 (host endpoint, no policy)", func() bool { return dialOK(h.peers[0], nodeIPOn(0), app) }, false},
		{"peer0->node:22 via eth1 (failsafe)", func() bool { return dialOK(h.peers[0], nodeIPOn(0), ssh) }, true},
		{"peer1->node:8081 via eth2 (no host endpoint)", func() bool { return dialOK(h.peers[1], nodeIPOn(1), app) }, true},
	})
	if s := h.save(t, "filter"); !strings.Contains(s, "-A cali-fh-eth1") || strings.Contains(s, "cali-fh-eth2") {
		t.Errorf("want eth1 (only) dispatched to host endpoint chains:\n%s", s)
	}
}

// TestPrivilegedDNATedHostEgress: host-originated connections DNAT'd in
// the node's nat OUTPUT (a service-like 10.96.0.10 whose route is the
// uplink) to a peer behind the host endpoint eth1 are policed by eth1's
// egress policy, as in Calico, in mangle POSTROUTING: filter OUTPUT still
// sees the pre-DNAT output interface.
func TestPrivilegedDNATedHostEgress(t *testing.T) { forEachMode(t, testDNATedHostEgress) }

func testDNATedHostEgress(t *testing.T, mode string) {
	h := newHostNet(t, mode, 1)
	peer, peerIP := h.peers[0], peerIPOn(0)
	const allowed, denied = 8080, 9999
	listenTCP(t, peer, allowed)
	listenTCP(t, peer, denied)
	// The DNAT'd packets keep the source of the pre-DNAT route (the
	// uplink's address): the peer routes it back through the node.
	err := peer.Do(func(ns.NetNS) error {
		_, uplinkNet, _ := net.ParseCIDR("192.168.200.0/24")
		return netlink.RouteAdd(&netlink.Route{Dst: uplinkNet, Gw: net.ParseIP(nodeIPOn(0))})
	})
	if err != nil {
		t.Fatal(err)
	}
	for svcPort, to := range map[int]int{80: denied, 81: allowed} {
		_, err := h.run.Run(context.Background(), "iptables", []string{"-t", "nat", "-A", "OUTPUT", "-d", "10.96.0.10/32",
			"-p", "tcp", "--dport", fmt.Sprint(svcPort), "-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", peerIP, to)}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	h.always = []any{ct.HEP("node1-eth1", "node1", "eth1", map[string]string{"role": "node"}, nodeIPOn(0))}
	h.apply(t, ct.GNP("host-out", "default", ct.Ptr(10.0), "role == 'node'", ct.Egress, nil,
		[]v3.Rule{tcpRule(v3.Allow, fmt.Sprint(allowed))}))
	runChecks(t, []check{
		{"node->peer:8080 (direct, allowed)", func() bool { return dialOK(h.node, peerIP, allowed) }, true},
		{"node->peer:9999 (direct, denied)", func() bool { return dialOK(h.node, peerIP, denied) }, false},
		{"node->10.96.0.10:81 (DNAT to peer:8080, allowed)", func() bool { return dialOK(h.node, "10.96.0.10", 81) }, true},
		{"node->10.96.0.10:80 (DNAT to peer:9999, denied)", func() bool { return dialOK(h.node, "10.96.0.10", 80) }, false},
	})
}
