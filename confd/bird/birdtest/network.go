package birdtest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Bridge creates bridge "br0" in seg, the namespace acting as the L2
// segment between test nodes.
func Bridge(t testing.TB, seg ns.NetNS) {
	t.Helper()
	err := seg.Do(func(ns.NetNS) error {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("adding bridge: %w", err)
		}
		return netlink.LinkSetUp(br)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Attach plugs node into seg's bridge with a veth pair: "eth0" in node with
// address cidr (e.g. "10.99.0.1/24"), segIf enslaved to br0 in seg.
func Attach(t testing.TB, seg, node ns.NetNS, segIf, cidr string) {
	t.Helper()
	err := seg.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: segIf}, PeerName: segIf + "p"}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("adding veth: %w", err)
		}
		peer, err := netlink.LinkByName(segIf + "p")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(node.Fd())); err != nil {
			return err
		}
		br, err := netlink.LinkByName("br0")
		if err != nil {
			return err
		}
		l, err := netlink.LinkByName(segIf)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetMaster(l, br); err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = node.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(segIf + "p")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetName(l, "eth0"); err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Pod wires a "pod" the way Calico's CNI does: a fresh namespace pod with
// eth0 holding podIP/32 and a default route via 169.254.1.1, joined by a
// veth to hostIf in node, which answers ARP by proxy and routes podIP/32 to
// it (default route protocol, so BIRD's kernel protocol learns it).
func Pod(t testing.TB, node, pod ns.NetNS, hostIf, podIP string) {
	t.Helper()
	err := node.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostIf}, PeerName: hostIf + "p"}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("adding pod veth: %w", err)
		}
		peer, err := netlink.LinkByName(hostIf + "p")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(pod.Fd())); err != nil {
			return err
		}
		l, err := netlink.LinkByName(hostIf)
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	Sysctl(t, node, "net.ipv4.conf."+hostIf+".proxy_arp", "1")
	Sysctl(t, node, "net.ipv4.neigh."+hostIf+".proxy_delay", "0")
	MustInNS(t, node, "ip", "route", "add", podIP+"/32", "dev", hostIf)
	MustInNS(t, pod, "ip", "link", "set", "lo", "up")
	MustInNS(t, pod, "ip", "link", "set", hostIf+"p", "name", "eth0")
	MustInNS(t, pod, "ip", "addr", "add", podIP+"/32", "dev", "eth0")
	MustInNS(t, pod, "ip", "link", "set", "eth0", "up")
	MustInNS(t, pod, "ip", "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link")
	MustInNS(t, pod, "ip", "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
}

// Sysctl sets a sysctl inside netns n by writing /proc/sys (no procps
// needed), e.g. Sysctl(t, n, "net.ipv4.ip_forward", "1").
func Sysctl(t testing.TB, n ns.NetNS, key, value string) {
	t.Helper()
	path := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	err := n.Do(func(ns.NetNS) error {
		return os.WriteFile(path, []byte(value), 0o644)
	})
	if err != nil {
		t.Fatalf("sysctl %s=%s: %v", key, value, err)
	}
}
