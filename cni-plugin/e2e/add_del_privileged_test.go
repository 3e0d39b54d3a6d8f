//go:build privileged

package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedPodLifecycle: pods get addresses from calico-ipam and
// reach each other and the node; CHECK passes and then catches a deleted
// route; DEL is repeatable and leaves nothing.
func TestPrivilegedPodLifecycle(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.244.0.0/16"}})
	a, b := c.newPod("pod-a"), c.newPod("pod-b")
	c.mustAdd(a)
	c.mustAdd(b)
	if !strings.HasPrefix(a.ip(false), "10.244.") || a.ip(false) == b.ip(false) {
		t.Fatalf("addresses %s and %s", a.ip(false), b.ip(false))
	}

	bAddr := serve(t, b.netns, net.JoinHostPort(b.ip(false), "8080"), "b")
	if got, err := dial(a.netns, bAddr); err != nil || got != "b" {
		t.Fatalf("pod -> pod: %q %v", got, err)
	}
	if got, err := dial(c.node, bAddr); err != nil || got != "b" {
		t.Fatalf("node -> pod: %q %v", got, err)
	}
	nodeAddr := serve(t, c.node, netnstest.NodeIPv4+":9000", "node")
	if got, err := dial(a.netns, nodeAddr); err != nil || got != "node" {
		t.Fatalf("pod -> node: %q %v", got, err)
	}
	// And ICMP: pod -> pod, pod -> node, node -> pod.
	for i, ping := range []struct {
		from ns.NetNS
		to   string
		what string
	}{{a.netns, b.ip(false), "pod -> pod"}, {a.netns, netnstest.NodeIPv4, "pod -> node"}, {c.node, a.ip(false), "node -> pod"}} {
		if err := netnstest.Ping(ping.from, ping.to, i+1, 5*time.Second); err != nil {
			t.Fatalf("%s: %v", ping.what, err)
		}
	}

	if err := c.check(a); err != nil {
		t.Fatalf("CHECK of a healthy pod: %v", err)
	}
	c.inNode(func() error {
		out, err := exec.Command("ip", "route", "del", a.ip(false)+"/32").CombinedOutput()
		if err != nil {
			t.Fatalf("deleting the route: %v %s", err, out)
		}
		return nil
	})
	err := c.check(a)
	if code, msg := cniCode(err); code != 104 || !strings.Contains(msg, "node route "+a.ip(false)+"/32 is missing") {
		t.Fatalf("CHECK after deleting the node route: code %d %q", code, msg)
	}

	for i := 0; i < 2; i++ {
		if err := c.del(a); err != nil {
			t.Fatalf("DEL a (%d): %v", i, err)
		}
	}
	if err := c.del(b); err != nil {
		t.Fatal(err)
	}
	// DEL of a pod whose namespace is already gone.
	b.netns.Close()
	if err := c.del(b); err != nil {
		t.Fatalf("DEL after the netns is gone: %v", err)
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestPrivilegedHundredPodsLeaveNothing adds and deletes 100 pods.
func TestPrivilegedHundredPodsLeaveNothing(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.245.0.0/16"}})
	pods := make([]*pod, 100)
	seen := map[string]bool{}
	for i := range pods {
		pods[i] = c.newPod(fmt.Sprintf("p%03d", i))
		c.mustAdd(pods[i])
		ip := pods[i].ip(false)
		if seen[ip] {
			t.Fatalf("address %s handed out twice", ip)
		}
		seen[ip] = true
	}
	for _, p := range pods {
		if err := c.del(p); err != nil {
			t.Fatal(err)
		}
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left behind after 100 pods: %v", left)
	}
}

// TestPrivilegedDualStack: a pod gets an IPv4 and an IPv6 address and
// talks IPv6 to the node and another pod.
func TestPrivilegedDualStack(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.246.0.0/16", "fd00:246::/64"}, assignIPv6: true})
	a, b := c.newPod("v6-a"), c.newPod("v6-b")
	c.mustAdd(a)
	c.mustAdd(b)
	if a.ip(true) == "" || a.ip(false) == "" {
		t.Fatalf("not dual stack: %+v", a.res.IPs)
	}
	node6 := serve(t, c.node, "["+netnstest.NodeIPv6+"]:9006", "node6")
	if got, err := dial(a.netns, node6); err != nil || got != "node6" {
		t.Fatalf("pod -> node over IPv6: %q %v", got, err)
	}
	c.node.Do(func(ns.NetNS) error {
		return exec.Command("sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1").Run()
	})
	b6 := serve(t, b.netns, net.JoinHostPort(b.ip(true), "8086"), "b6")
	if got, err := dial(a.netns, b6); err != nil || got != "b6" {
		t.Fatalf("pod -> pod over IPv6: %q %v", got, err)
	}
	if err := netnstest.Ping(a.netns, b.ip(true), 1, 5*time.Second); err != nil {
		t.Fatalf("ping6 pod -> pod: %v", err)
	}
	if err := netnstest.Ping(c.node, a.ip(true), 2, 5*time.Second); err != nil {
		t.Fatalf("ping6 node -> pod: %v", err)
	}
	for _, p := range []*pod{a, b} {
		if err := c.del(p); err != nil {
			t.Fatal(err)
		}
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}
