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

// listenTCP serves "ok" on port in netns until the test ends.
func listenTCP(t *testing.T, netns ns.NetNS, port int) {
	t.Helper()
	var l net.Listener
	err := netns.Do(func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("listening on %d: %v", port, err)
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

// dialOK reports whether a TCP connection from netns to ip:port gets "ok".
func dialOK(netns ns.NetNS, ip string, port int) bool {
	ok := false
	_ = netns.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: timeout}
		c, err := d.Dial("tcp4", net.JoinHostPort(ip, fmt.Sprint(port)))
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

// TestPrivilegedHostEndpointFailsafe puts a host endpoint on the node's
// eth1 (linked to a peer namespace) and checks that the failsafe ports
// stay open whatever the policy says, that other ports follow policy, and
// that host egress is policed too except for failsafe-out ports.
func TestPrivilegedHostEndpointFailsafe(t *testing.T) { forEachMode(t, testHostEndpointFailsafe) }

func testHostEndpointFailsafe(t *testing.T, mode string) {
	node := newNode(t)
	peer := netnstest.New(t)
	const nodeIP, peerIP = "192.168.50.1", "192.168.50.2"
	err := node.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth1"}, PeerName: "peer0"}); err != nil {
			return err
		}
		p, err := netlink.LinkByName("peer0")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(p, int(peer.Fd())); err != nil {
			return err
		}
		return upWithAddr("eth1", nodeIP+"/24")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := peer.Do(func(ns.NetNS) error { return upWithAddr("peer0", peerIP+"/24") }); err != nil {
		t.Fatal(err)
	}
	const ssh, app, peerAPI, peerOther = 22, 8081, 6443, 9999
	listenTCP(t, node, ssh)
	listenTCP(t, node, app)
	listenTCP(t, peer, peerAPI)
	listenTCP(t, peer, peerOther)

	dp := newModeDataplane(t, mode, node.Path(), dataplane.Config{Runner: dataplane.ExecRunner{NetnsPath: node.Path()}, V4: dataplane.BackendDefaultV4})
	hep := ct.HEP("node1-eth1", "node1", "eth1", map[string]string{"role": "node"}, nodeIP)
	apply := func(t *testing.T, objs ...any) {
		t.Helper()
		res := calc.Compute(ct.Input("node1", append([]any{hep}, objs...)))
		if len(res.Problems) > 0 {
			t.Fatalf("problems: %v", res.Problems)
		}
		dp.SetDesired(rules.Render(rules.DefaultConfig(), res, 4))
		if _, err := dp.Apply(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	tcpAllow := func(port string) []v3.Rule {
		return []v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Ports: ct.Ports(port)}}}
	}
	cases := []struct {
		name   string
		objs   []any
		checks []check
	}{
		{"no policy: only failsafe ports", nil, []check{
			{"peer->node:22 (failsafe in)", func() bool { return dialOK(peer, nodeIP, ssh) }, true},
			{"peer->node:8081", func() bool { return dialOK(peer, nodeIP, app) }, false},
			{"node->peer:6443 (failsafe out)", func() bool { return dialOK(node, peerIP, peerAPI) }, true},
			{"node->peer:9999", func() bool { return dialOK(node, peerIP, peerOther) }, false},
		}},
		{"policy opens 8081 in and 9999 out", []any{
			ct.GNP("host-in", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress, tcpAllow("8081"), nil),
			ct.GNP("host-out", "default", ct.Ptr(10.0), "role == 'node'", ct.Egress, nil, tcpAllow("9999")),
		}, []check{
			{"peer->node:8081", func() bool { return dialOK(peer, nodeIP, app) }, true},
			{"node->peer:9999", func() bool { return dialOK(node, peerIP, peerOther) }, true},
			{"peer->node:22 (failsafe in)", func() bool { return dialOK(peer, nodeIP, ssh) }, true},
		}},
		{"deny-all cannot close the failsafe ports", []any{
			ct.GNP("deny-all", "default", ct.Ptr(1.0), "role == 'node'", ct.Both,
				[]v3.Rule{{Action: v3.Deny}}, []v3.Rule{{Action: v3.Deny}}),
		}, []check{
			{"peer->node:22 (failsafe in)", func() bool { return dialOK(peer, nodeIP, ssh) }, true},
			{"peer->node:8081", func() bool { return dialOK(peer, nodeIP, app) }, false},
			{"node->peer:6443 (failsafe out)", func() bool { return dialOK(node, peerIP, peerAPI) }, true},
			{"node->peer:9999", func() bool { return dialOK(node, peerIP, peerOther) }, false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			apply(t, tc.objs...)
			for _, c := range tc.checks {
				if got := c.got(); got != c.want {
					t.Errorf("%s: connected=%v, want %v", c.desc, got, c.want)
				}
			}
		})
	}
}

func upWithAddr(name, cidr string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, addr); err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}
