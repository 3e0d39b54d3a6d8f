//go:build privileged && integration

package registration

import (
	"context"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/ipam"
)

// TestPrivilegedKeepTunnels: with KeepTunnels running, a pool switched to
// VXLAN gives the node a VXLAN tunnel address, switched to IPIP swaps it
// for an IPIP one, and switched to Never releases it -- all live; a
// WireGuard public key on the Node gives the WireGuard device an address,
// withdrawn it is released; with host encryption none is given (and one
// held is released).
func TestPrivilegedKeepTunnels(t *testing.T) {
	c := multinode.New(t, multinode.Options{Nodes: 1})
	n := c.Nodes[0]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	pool := c.CreatePool("p", "10.73.0.0/16", multinode.PoolOptions{})
	go func() {
		KeepTunnels(ctx, c.Client, ipam.New(c.Client, ipam.Config{}), n.Name, TunnelOptions{}, nil)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	node := func() *v3.Node {
		r, err := c.Client.Get(context.Background(), datastore.Key{Kind: v3.KindNode, Name: n.Name})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*v3.Node)
	}
	wait := func(what string, ok func(*v3.Node) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(node()) {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10s: %s (node spec %+v)", what, node().Spec)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	set := func(ipip v3.IPIPMode, vxlan v3.VXLANMode) {
		t.Helper()
		r, err := c.Client.Get(context.Background(), datastore.KeyOf(pool))
		if err != nil {
			t.Fatal(err)
		}
		p := r.(*v3.IPPool)
		p.Spec.IPIPMode, p.Spec.VXLANMode = ipip, vxlan
		if _, err := c.Client.Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	set(v3.IPIPModeNever, v3.VXLANModeAlways)
	wait("VXLAN address", func(n *v3.Node) bool { return n.Spec.IPv4VXLANTunnelAddr != "" && n.Spec.VXLANTunnelMACAddr != "" })
	set(v3.IPIPModeAlways, v3.VXLANModeNever)
	wait("IPIP address instead", func(n *v3.Node) bool {
		return n.Spec.IPv4VXLANTunnelAddr == "" && n.Spec.BGP != nil && n.Spec.BGP.IPv4IPIPTunnelAddr != ""
	})
	set(v3.IPIPModeNever, v3.VXLANModeNever)
	wait("no tunnel address", func(n *v3.Node) bool { return n.Spec.IPv4VXLANTunnelAddr == "" && n.Spec.BGP.IPv4IPIPTunnelAddr == "" })
	// felix publishes a WireGuard key: the device gets an address from the
	// pool (Calico's wireguard-tunnel-addr- handle); withdrawn: released.
	setKey := func(k string) {
		t.Helper()
		cur := node()
		if cur.Status == nil {
			cur.Status = &v3.NodeStatus{}
		}
		cur.Status.WireguardPublicKey = k
		if _, err := c.Client.Update(context.Background(), cur); err != nil {
			t.Fatal(err)
		}
	}
	setKey("jH/ZVp1Lc0PmfDpWZk0Hx1IctNiG2F6DyEjA3Ba2xWk=")
	wait("WireGuard address", func(n *v3.Node) bool {
		return n.Spec.Wireguard != nil && strings.HasPrefix(n.Spec.Wireguard.InterfaceIPv4Address, "10.73.")
	})
	if ips, err := ipam.New(c.Client, ipam.Config{}).IPsByHandle(context.Background(), WireguardHandle(n.Name)); err != nil || len(ips) != 1 {
		t.Errorf("handle %s: %v %v", WireguardHandle(n.Name), ips, err)
	}
	setKey("")
	wait("WireGuard address released", func(n *v3.Node) bool { return n.Spec.Wireguard == nil })
	handles, err := c.Client.List(context.Background(), v3.KindIPAMHandle, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range handles.Items {
		if len(h.(*v3.IPAMHandle).Spec.Block) > 0 {
			t.Errorf("handle %s still holds addresses", h.GetName())
		}
	}

	// Host encryption (FELIX_WIREGUARDHOSTENCRYPTIONENABLED, as Calico's
	// calico-node reads it): no device address; one held is released.
	cancel()
	<-done
	bg := context.Background()
	alloc := ipam.New(c.Client, ipam.Config{})
	setKey("jH/ZVp1Lc0PmfDpWZk0Hx1IctNiG2F6DyEjA3Ba2xWk=")
	if err := EnsureTunnelAddrs(bg, c.Client, alloc, n.Name, TunnelOptions{}); err != nil || node().Spec.Wireguard == nil {
		t.Fatalf("a WireGuard address without host encryption: %v, %+v", err, node().Spec.Wireguard)
	}
	if err := EnsureTunnelAddrs(bg, c.Client, alloc, n.Name, TunnelOptions{WireguardHostEncryption: true}); err != nil {
		t.Fatal(err)
	}
	if w := node().Spec.Wireguard; w != nil {
		t.Errorf("with host encryption the Node keeps a WireGuard address: %+v", w)
	}
	if ips, err := alloc.IPsByHandle(bg, WireguardHandle(n.Name)); len(ips) != 0 {
		t.Errorf("with host encryption %s holds %v (%v)", WireguardHandle(n.Name), ips, err)
	}
}
