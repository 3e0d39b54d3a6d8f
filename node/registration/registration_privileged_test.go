//go:build privileged && integration

package registration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/ipam"
)

// TestPrivilegedRegistration: a node in the lab registers with
// interface=eth0 and follows an address change of eth0 (netlink
// subscription); a method matching nothing fails naming the method;
// tunnel addresses are allocated under Calico's handles when a VXLAN
// pool appears and released when the pool stops using VXLAN.
func TestPrivilegedRegistration(t *testing.T) {
	c := multinode.New(t, multinode.Options{Nodes: 1, NoNodeResources: true})
	n := c.Nodes[0]
	ctx := context.Background()
	env, err := NetlinkEnv(n.NL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Register(ctx, c.Client, Config{NodeName: n.Name, IPv4Method: "interface=wlan.*"}, env); !errors.Is(err, ErrNoAddress) || !contains(err.Error(), "interface=wlan.*") {
		t.Fatalf("Register with a method matching nothing: %v; want ErrNoAddress naming the method", err)
	}

	kctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Keep(kctx, c.Client, Config{NodeName: n.Name, IPv4Method: "interface=eth0"}, netns.NsHandle(int(n.Fd())), nil)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Keep: %v", err)
		}
	})
	waitAddr := func(want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := c.Client.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: n.Name})
			if err == nil && r.(*v3.Node).Spec.BGP != nil && r.(*v3.Node).Spec.BGP.IPv4Address == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("node's bgp.ipv4Address never became %s (last: %v, %v)", want, r, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitAddr(n.Addr.String())
	eth0, _ := n.NL.LinkByName("eth0")
	old, _ := netlink.ParseAddr(n.Addr.String())
	nu, _ := netlink.ParseAddr("172.30.1.99/24")
	if err := n.NL.AddrDel(eth0, old); err != nil {
		t.Fatal(err)
	}
	if err := n.NL.AddrAdd(eth0, nu); err != nil {
		t.Fatal(err)
	}
	waitAddr("172.30.1.99/24")

	// Tunnel addresses.
	alloc := ipam.New(c.Client, ipam.Config{})
	pool := c.CreatePool("vx", "10.71.0.0/16", multinode.PoolOptions{VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever})
	if err := EnsureTunnelAddrs(ctx, c.Client, alloc, n.Name, TunnelOptions{}); err != nil {
		t.Fatal(err)
	}
	r, _ := c.Client.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: n.Name})
	node := r.(*v3.Node)
	ips, err := alloc.IPsByHandle(ctx, VXLANHandle(n.Name))
	if err != nil || len(ips) != 1 || ips[0].String() != node.Spec.IPv4VXLANTunnelAddr || node.Spec.VXLANTunnelMACAddr == "" {
		t.Fatalf("VXLAN tunnel address: handle %v (%v), node %q mac %q", ips, err, node.Spec.IPv4VXLANTunnelAddr, node.Spec.VXLANTunnelMACAddr)
	}
	if node.Spec.BGP.IPv4IPIPTunnelAddr != "" {
		t.Errorf("an IPIP address without an IPIP pool: %s", node.Spec.BGP.IPv4IPIPTunnelAddr)
	}
	// Idempotent.
	if err := EnsureTunnelAddrs(ctx, c.Client, alloc, n.Name, TunnelOptions{}); err != nil {
		t.Fatal(err)
	}
	if again, _ := alloc.IPsByHandle(ctx, VXLANHandle(n.Name)); len(again) != 1 || again[0] != ips[0] {
		t.Errorf("second EnsureTunnelAddrs changed the address: %v -> %v", ips, again)
	}
	pool.Spec.VXLANMode = v3.VXLANModeNever
	if _, err := c.Client.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTunnelAddrs(ctx, c.Client, alloc, n.Name, TunnelOptions{}); err != nil {
		t.Fatal(err)
	}
	r, _ = c.Client.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: n.Name})
	if a := r.(*v3.Node).Spec.IPv4VXLANTunnelAddr; a != "" {
		t.Errorf("VXLAN address %s kept after no pool uses VXLAN", a)
	}
	if left, err := alloc.IPsByHandle(ctx, VXLANHandle(n.Name)); err == nil && len(left) != 0 {
		t.Errorf("handle still holds %v", left)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
