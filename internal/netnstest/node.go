package netnstest

import (
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Node addresses of the namespace NewNode makes.
const (
	NodeIPv4 = "192.0.2.1"
	NodeIPv6 = "fd00:1::1"
)

// NewNode makes a fresh namespace shaped like a Kubernetes node: lo up, an
// "uplink" (a veth whose peer stays inside; this kernel has no dummy
// interfaces) carrying NodeIPv4/24 and NodeIPv6/64, and a default route
// out of it, which proxy-ARP needs before it answers for a pod's gateway.
func NewNode(t testing.TB) ns.NetNS {
	t.Helper()
	n := New(t)
	if err := ShapeNode(n); err != nil {
		t.Fatalf("making a node namespace: %v", err)
	}
	return n
}

// ShapeNode gives an existing namespace NewNode's shape (for programs
// that are not tests, such as the demo).
func ShapeNode(n ns.NetNS) error {
	return n.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink"}, PeerName: "uplink-peer"}); err != nil {
			return err
		}
		for _, name := range []string{"lo", "uplink", "uplink-peer"} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		up, err := netlink.LinkByName("uplink")
		if err != nil {
			return err
		}
		for _, a := range []string{NodeIPv4 + "/24", NodeIPv6 + "/64"} {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = syscall.IFA_F_NODAD
			if err := netlink.AddrAdd(up, addr); err != nil {
				return fmt.Errorf("adding %s: %w", a, err)
			}
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: up.Attrs().Index, Gw: net.ParseIP("192.0.2.254"), Flags: int(netlink.FLAG_ONLINK)})
	})
}
