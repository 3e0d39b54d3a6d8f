//go:build privileged

package wiring

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/internal/netnstest"
)

func node(t *testing.T) ns.NetNS { return netnstest.NewNode(t) }

func cidrs(t *testing.T, ss ...string) []net.IPNet {
	var out []net.IPNet
	for _, s := range ss {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip
		out = append(out, *n)
	}
	return out
}

func serve(t *testing.T, n ns.NetNS, addr, reply string) string {
	return netnstest.ServeTCP(t, n, addr, reply)
}

func dial(n ns.NetNS, addr string) (string, error) { return netnstest.DialTCP(n, addr) }

func TestPrivilegedSetupPodTraffic(t *testing.T) {
	nodeNS := node(t)
	podA, podB := netnstest.New(t), netnstest.New(t)
	hostA, hostB := HostVethName("ns", "a"), HostVethName("ns", "b")
	a := Pod{NetNSPath: podA.Path(), ContainerIf: "eth0", HostIf: hostA, Addrs: cidrs(t, "10.65.0.5/32", "fd00:65::5/128"), MTU: 1440, HostNS: nodeNS}
	b := Pod{NetNSPath: podB.Path(), ContainerIf: "eth0", HostIf: hostB, Addrs: cidrs(t, "10.65.0.6/32"), MTU: 1440, HostNS: nodeNS, Owner: "k8s-pod-network.cid-b"}
	for _, p := range []Pod{a, b} {
		if _, err := Setup(p); err != nil {
			t.Fatal(err)
		}
	}

	// What Calico's CNI leaves on the node.
	err := nodeNS.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(hostA)
		if err != nil {
			return err
		}
		if got := l.Attrs().HardwareAddr.String(); got != HostMAC {
			return fmt.Errorf("host MAC %s", got)
		}
		if l.Attrs().MTU != 1440 {
			return fmt.Errorf("host MTU %d", l.Attrs().MTU)
		}
		for key, want := range map[string]string{
			"ipv4/conf/" + hostA + "/proxy_arp":    "1",
			"ipv4/neigh/" + hostA + "/proxy_delay": "0",
			"ipv6/conf/" + hostA + "/proxy_ndp":    "1",
			"ipv6/conf/" + hostA + "/accept_ra":    "0",
		} {
			b, err := os.ReadFile("/proc/sys/net/" + key)
			if err != nil || strings.TrimSpace(string(b)) != want {
				return fmt.Errorf("sysctl %s = %q (%v), want %s", key, b, err, want)
			}
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		found := 0
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsLinkLocalUnicast() {
				continue
			}
			if r.Priority != RouteMetric || r.Protocol != syscall.RTPROT_BOOT {
				return fmt.Errorf("route %s: metric %d proto %d", r.Dst, r.Priority, r.Protocol)
			}
			found++
		}
		if found != 2 {
			return fmt.Errorf("%d pod routes on %s, want 2: %v", found, hostA, routes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// pod -> node, node -> pod, pod -> pod (through the node), IPv6 pod -> node.
	nodeAddr := serve(t, nodeNS, "192.0.2.1:0", "node")
	if got, err := dial(podA, nodeAddr); err != nil || got != "node" {
		t.Fatalf("pod A -> node: %q %v", got, err)
	}
	podBAddr := serve(t, podB, "10.65.0.6:0", "pod-b")
	if got, err := dial(podA, podBAddr); err != nil || got != "pod-b" {
		t.Fatalf("pod A -> pod B: %q %v", got, err)
	}
	if got, err := dial(nodeNS, podBAddr); err != nil || got != "pod-b" {
		t.Fatalf("node -> pod B: %q %v", got, err)
	}
	node6 := serve(t, nodeNS, "[fd00:1::1]:0", "node6")
	if got, err := dial(podA, node6); err != nil || got != "node6" {
		t.Fatalf("pod A -> node over IPv6: %q %v", got, err)
	}

	// Teardown removes the veth and the routes, and is idempotent, also
	// when the pod namespace is already gone; it removes a veth only if
	// it is marked as the attachment's (or unmarked and paired with the
	// pod's namespace).
	for i := 0; i < 2; i++ {
		if err := Teardown(nodeNS, hostA, "", podA.Path()); err != nil {
			t.Fatalf("teardown %d: %v", i, err)
		}
	}
	for _, owner := range []string{"", "k8s-pod-network.cid-other"} {
		if err := Teardown(nodeNS, hostB, owner, podA.Path()); err != nil {
			t.Fatal(err)
		}
		if err := nodeNS.Do(func(ns.NetNS) error { _, err := netlink.LinkByName(hostB); return err }); err != nil {
			t.Fatalf("Teardown as %q removed pod B's veth: %v", owner, err)
		}
	}
	if err := Teardown(nodeNS, hostB, "k8s-pod-network.cid-b", "/var/run/netns/does-not-exist"); err != nil {
		t.Fatalf("teardown with a missing netns: %v", err)
	}
	nodeNS.Do(func(ns.NetNS) error {
		links, _ := netlink.LinkList()
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "cali") {
				t.Errorf("left behind %s", l.Attrs().Name)
			}
		}
		routes, _ := netlink.RouteList(nil, netlink.FAMILY_V4)
		for _, r := range routes {
			if r.Dst != nil && strings.HasPrefix(r.Dst.String(), "10.65.") {
				t.Errorf("left behind route %s", r.Dst)
			}
		}
		return nil
	})
}

// TestPrivilegedSetupRollsBack: a failure after the veth exists (IPv6 is
// disabled in the pod, so the address cannot be added) leaves nothing.
func TestPrivilegedSetupRollsBack(t *testing.T) {
	nodeNS := node(t)
	pod := netnstest.New(t)
	if err := pod.Do(func(ns.NetNS) error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	host := HostVethName("ns", "broken")
	_, err := Setup(Pod{NetNSPath: pod.Path(), ContainerIf: "eth0", HostIf: host, Addrs: cidrs(t, "10.65.0.9/32", "fd00:65::9/128"), MTU: 1500, HostNS: nodeNS})
	if err == nil {
		t.Fatal("setup succeeded with IPv6 disabled in the pod")
	}
	for _, n := range []ns.NetNS{nodeNS, pod} {
		n.Do(func(ns.NetNS) error {
			links, _ := netlink.LinkList()
			for _, l := range links {
				if name := l.Attrs().Name; name != "lo" && !strings.HasPrefix(name, "uplink") {
					t.Errorf("rollback left %s in %s", name, n.Path())
				}
			}
			return nil
		})
	}
	// A stale host end from an earlier pod with the same name is replaced.
	pod2 := netnstest.New(t)
	p := Pod{NetNSPath: pod2.Path(), ContainerIf: "eth0", HostIf: host, Addrs: cidrs(t, "10.65.0.10/32"), MTU: 1500, HostNS: nodeNS}
	nodeNS.Do(func(ns.NetNS) error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host}, PeerName: "stale-peer"})
	})
	if _, err := Setup(p); err != nil {
		t.Fatalf("setup over a stale host interface: %v", err)
	}
}
