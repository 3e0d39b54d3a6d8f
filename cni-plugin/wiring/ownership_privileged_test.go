//go:build privileged

package wiring

import (
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedOwnership: Setup marks the host end with its owner;
// Teardown removes only that owner's veth and never a link inside the
// pod's namespace; Prepare refuses to take over a link that is not a veth
// (issue 19, items 3 and 7).
func TestPrivilegedOwnership(t *testing.T) {
	nodeNS := node(t)
	pod := netnstest.New(t)
	host := HostVethName("ns", "owned")
	p := Pod{NetNSPath: pod.Path(), ContainerIf: "eth0", HostIf: host, Addrs: cidrs(t, "10.66.0.5/32"), MTU: 1500, HostNS: nodeNS, Owner: "net.cid-1"}
	if _, err := Setup(p); err != nil {
		t.Fatal(err)
	}
	exists, owned, err := Owned(nodeNS, host, "net.cid-1", "")
	if err != nil || !exists || !owned {
		t.Fatalf("Owned after Setup: %v %v %v", exists, owned, err)
	}
	// Another owner, or the node's uplink named as the pod's interface
	// with the node's namespace as the pod's: nothing is removed.
	if err := Teardown(nodeNS, host, "net.cid-2", pod.Path()); err != nil {
		t.Fatal(err)
	}
	if err := Teardown(nodeNS, "uplink", "net.cid-1", nodeNS.Path()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{host, "uplink"} {
		if err := nodeNS.Do(func(ns.NetNS) error { _, err := netlink.LinkByName(name); return err }); err != nil {
			t.Fatalf("%s was removed: %v", name, err)
		}
	}
	if err := Teardown(nodeNS, host, "net.cid-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := nodeNS.Do(func(ns.NetNS) error { _, err := netlink.LinkByName(host); return err }); err == nil {
		t.Fatal("the owner's Teardown left its veth")
	}

	// A bridge with a pod's host name is not taken over.
	if err := nodeNS.Do(func(ns.NetNS) error {
		return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: host}})
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := Setup(p); err == nil || !strings.Contains(err.Error(), "not a pod veth") {
		t.Fatalf("Setup over a bridge named %s: %v", host, err)
	}
	if err := nodeNS.Do(func(ns.NetNS) error { _, err := netlink.LinkByName(host); return err }); err != nil {
		t.Fatalf("the bridge was removed: %v", err)
	}
}

// TestPrivilegedSecondInterfaceRoutes: a second interface of a pod leaves
// the default route to the first, and CHECK of both passes.
func TestPrivilegedSecondInterfaceRoutes(t *testing.T) {
	nodeNS := node(t)
	pod := netnstest.New(t)
	eth0 := Pod{NetNSPath: pod.Path(), ContainerIf: "eth0", HostIf: HostVethNameForPodInterface("ns", "two", "eth0"), Addrs: cidrs(t, "10.67.0.5/32"), MTU: 1500, HostNS: nodeNS, Owner: "net.cid"}
	net1 := eth0
	net1.ContainerIf, net1.HostIf, net1.Addrs, net1.Owner = "net1", HostVethNameForPodInterface("ns", "two", "net1"), cidrs(t, "10.67.0.6/32"), "net.cid.net1"
	r0, err := Setup(eth0)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := Setup(net1)
	if err != nil {
		t.Fatal(err)
	}
	if !r0.DefaultV4 || r1.DefaultV4 {
		t.Fatalf("default routes: eth0 %v, net1 %v; want eth0 only", r0.DefaultV4, r1.DefaultV4)
	}
	for _, p := range []Pod{eth0, net1} {
		if d := Check(p); len(d) > 0 {
			t.Fatalf("CHECK %s: %v", p.ContainerIf, d)
		}
	}
}
