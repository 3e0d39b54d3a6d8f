//go:build privileged

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// calicoGatewayMAC is the MAC Calico's CNI gives the host side of a pod's
// veth; the pod's IPv6 default route points at its link-local address.
const calicoGatewayMAC = "ee:ee:ee:ee:ee:ee"

var calicoGatewayLL = net.ParseIP("fe80::ecee:eeff:feee:eeee")

// newPod6 wires an IPv6-only pod the way Calico's CNI does: host side
// cali... with MAC ee:ee:ee:ee:ee:ee and a /128 route to the pod, pod side
// eth0 with the /128 and a default route via the host side's link-local
// address. DAD is off so addresses are usable at once.
func newPod6(t *testing.T, node ns.NetNS, iface, ip string) (ns.NetNS, net.IP) {
	t.Helper()
	pod := netnstest.New(t)
	addr := net.ParseIP(ip)
	peerName := "tmp" + iface[4:]
	err := node.Do(func(ns.NetNS) error {
		mac, _ := net.ParseMAC(calicoGatewayMAC)
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: iface, HardwareAddr: mac}, PeerName: peerName}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		if err := writeSysctl("net/ipv6/conf/"+iface+"/accept_dad", "0"); err != nil {
			return err
		}
		peer, err := netlink.LinkByName(peerName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(pod.Fd())); err != nil {
			return err
		}
		host, err := netlink.LinkByName(iface)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(host); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Scope: netlink.SCOPE_LINK,
			Dst: &net.IPNet{IP: addr, Mask: net.CIDRMask(128, 128)}})
	})
	if err != nil {
		t.Fatalf("wiring %s in the node: %v", iface, err)
	}
	err = pod.Do(func(ns.NetNS) error {
		if err := writeSysctl("net/ipv6/conf/default/accept_dad", "0"); err != nil {
			return err
		}
		link, err := netlink.LinkByName(peerName)
		if err != nil {
			return err
		}
		if err := writeSysctl("net/ipv6/conf/"+peerName+"/accept_dad", "0"); err != nil {
			return err
		}
		if err := netlink.LinkSetName(link, "eth0"); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return err
		}
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: addr, Mask: net.CIDRMask(128, 128)},
			Flags: 0x02 /* IFA_F_NODAD */}); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: calicoGatewayLL,
			Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}})
	})
	if err != nil {
		t.Fatalf("wiring %s's namespace: %v", iface, err)
	}
	waitOperUp(t, node, iface)
	waitOperUp(t, pod, "eth0")
	return pod, addr
}

func listen6(t *testing.T, netns ns.NetNS, port int) {
	t.Helper()
	var l net.Listener
	if err := netns.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp6", fmt.Sprintf("[::]:%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("ok"))
			_ = c.Close()
		}
	}()
}

func dial6(netns ns.NetNS, ip net.IP, port int) bool {
	ok := false
	_ = netns.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: timeout}
		c, err := d.Dial("tcp6", net.JoinHostPort(ip.String(), fmt.Sprint(port)))
		if err != nil {
			return nil
		}
		defer c.Close()
		buf := make([]byte, 2)
		_, err = io.ReadFull(c, buf)
		ok = err == nil && string(buf) == "ok"
		return nil
	})
	return ok
}

// TestPrivilegedIPv6Policy proves the IPv6 path (ip6tables, inet6 ipsets,
// NDP through cali-wl-to-host) on real packets between two IPv6 pods.
func TestPrivilegedIPv6Policy(t *testing.T) { forEachMode(t, testIPv6Policy) }

func testIPv6Policy(t *testing.T, mode string) {
	nodeNS := newNode(t)
	if err := nodeNS.Do(func(ns.NetNS) error { return writeSysctl("net/ipv6/conf/all/forwarding", "1") }); err != nil {
		t.Fatal(err)
	}
	webNS, webIP := newPod6(t, nodeNS, "cali6aaa", "fd00:65::1")
	clientNS, clientIP := newPod6(t, nodeNS, "cali6ccc", "fd00:65::3")
	listen6(t, webNS, tcpPortA)
	listen6(t, webNS, tcpPortB)

	web := ct.WEP("prod", "web6", node, "cali6aaa", "", map[string]string{"app": "web"})
	web.Spec.IPNetworks = []string{webIP.String() + "/128"}
	client := ct.WEP("dev", "client6", node, "cali6ccc", "", map[string]string{"app": "client"})
	client.Spec.IPNetworks = []string{clientIP.String() + "/128"}
	base := []any{ct.NSProfile("prod", nil), ct.NSProfile("dev", nil), web, client}

	dp := newModeDataplane(t, mode, nodeNS.Path(), dataplane.Config{Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()},
		V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6})
	apply := func(t *testing.T, objs ...any) {
		t.Helper()
		res := calc.Compute(ct.Input(node, append(append([]any{}, base...), objs...)))
		if len(res.Problems) > 0 {
			t.Fatalf("problems: %v", res.Problems)
		}
		dp.SetDesired(rules.Render(rules.DefaultConfig(), res, 4), rules.Render(rules.DefaultConfig(), res, 6))
		if _, err := dp.Apply(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("profiles allow", func(t *testing.T) {
		apply(t)
		if !dial6(clientNS, webIP, tcpPortA) || !dial6(clientNS, webIP, tcpPortB) {
			t.Fatal("client->web over IPv6 failed with allow-all profiles")
		}
	})
	t.Run("selector ipset and port", func(t *testing.T) {
		apply(t, ct.NP("prod", "allow-client", nil, "app == 'web'", ct.Ingress, []v3.Rule{{
			Action: v3.Allow, Protocol: ct.Proto("TCP"),
			Source:      v3.EntityRule{Selector: "app == 'client'", NamespaceSelector: "all()"},
			Destination: v3.EntityRule{Ports: ct.Ports("8080")},
		}}, nil))
		if !dial6(clientNS, webIP, tcpPortA) {
			t.Error("client->web:8080 denied, want allowed")
		}
		if dial6(clientNS, webIP, tcpPortB) {
			t.Error("client->web:9090 allowed, want denied")
		}
	})
}
