//go:build privileged && integration

package multinode

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedHarness builds a two-subnet cluster with felix on every
// node and a CNI-wired pod per node, proves the underlay (node to node
// across the router, node to external) and the node-local pod path, and
// that nothing carrying the cluster's prefix is left afterwards.
func TestPrivilegedHarness(t *testing.T) {
	var prefix string
	t.Run("cluster", func(t *testing.T) {
		c := New(t, Options{Nodes: 3, SubnetOf: TwoSubnets})
		prefix = c.Prefix
		c.CreatePool("pool", "10.70.0.0/16", PoolOptions{})
		for _, n := range c.Nodes {
			n.StartFelix()
		}
		for i, a := range c.Nodes {
			for _, b := range c.Nodes[i+1:] {
				if err := netnstest.Ping(a, b.Addr.Addr().String(), 1, 3*time.Second); err != nil {
					t.Errorf("%s -> %s over the underlay: %v", a.Name, b.Name, err)
				}
			}
			if err := netnstest.Ping(a, ExternalIP.String(), 2, 3*time.Second); err != nil {
				t.Errorf("%s -> external: %v", a.Name, err)
			}
		}
		for _, n := range c.Nodes {
			p := n.AddPod("web")
			if !p.IP.IsValid() || !netip.MustParsePrefix("10.70.0.0/16").Contains(p.IP) {
				t.Fatalf("pod on %s got %v, want an address of the pool", n.Name, p.IP)
			}
			addr := netnstest.ServeTCP(t, p.NetNS, net.JoinHostPort(p.IP.String(), "8080"), "hi from "+n.Name)
			deadline := time.Now().Add(10 * time.Second)
			for {
				got, err := netnstest.DialTCPWithin(n, addr, time.Second)
				if err == nil && got == "hi from "+n.Name {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s -> its pod %s: %q, %v", n.Name, addr, got, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if got := Leftovers(prefix); len(got) != 3*2+2 {
			t.Errorf("namespaces with the prefix while running: %v", got)
		}
	})
	if got := Leftovers(prefix); len(got) != 0 {
		t.Errorf("left after the cluster's test ended: %v", got)
	}
}
