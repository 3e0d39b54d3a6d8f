//go:build privileged && integration

package e2e

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedVXLANBackend: with CALICO_NETWORKING_BACKEND=vxlan and a
// VXLAN default pool, calico-node runs no confd and no BIRD, its
// readiness has no BGP part, each Node gets a VXLAN tunnel address and
// MAC, and pods on the two nodes reach each other through felix's VXLAN
// routes.
func TestPrivilegedVXLANBackend(t *testing.T) {
	c := multinode.New(t, multinode.Options{Nodes: 2, NoNodeResources: true})
	var agents []*agent
	for _, n := range c.Nodes {
		a := newAgent(t, c, n, "CALICO_NETWORKING_BACKEND=vxlan", "CALICO_IPV4POOL_CIDR=10.82.0.0/16",
			"CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=Always")
		a.readyFlags = []string{"-felix-ready"}
		a.start()
		agents = append(agents, a)
	}
	for _, a := range agents {
		a.waitReady(60 * time.Second)
		if a.birdPid() != 0 {
			t.Errorf("BIRD runs on %s with the vxlan backend", a.node.Name)
		}
		code, body := a.http("/readiness")
		if code != 200 || strings.Contains(body, "bgp") || strings.Contains(body, "bird") || strings.Contains(body, "confd") {
			t.Errorf("/readiness on %s: %d %q (want felix only)", a.node.Name, code, body)
		}
	}
	for _, n := range c.Nodes {
		eventually(t, 10*time.Second, "VXLAN tunnel address and MAC on "+n.Name, func() (bool, string) {
			r, err := c.Client.Get(context.Background(), datastore.Key{Kind: v3.KindNode, Name: n.Name})
			if err != nil {
				return false, err.Error()
			}
			s := r.(*v3.Node).Spec
			return s.IPv4VXLANTunnelAddr != "" && s.VXLANTunnelMACAddr != "", s.IPv4VXLANTunnelAddr
		})
	}
	p0, p1 := c.Nodes[0].AddPod("p"), c.Nodes[1].AddPod("p")
	addr := netnstest.ServeTCP(t, p1.NetNS, net.JoinHostPort(p1.IP.String(), "8080"), "over vxlan")
	eventually(t, 20*time.Second, "pod on node0 -> pod on node1 over VXLAN", func() (bool, string) {
		got, err := netnstest.DialTCPWithin(p0.NetNS, addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		return got == "over vxlan", got
	})
	if out, err := c.Nodes[0].IP("route", "show", "dev", "vxlan.calico"); err != nil || !strings.Contains(out, "onlink") {
		t.Errorf("node0's VXLAN routes: %q, %v", out, err)
	}
}
