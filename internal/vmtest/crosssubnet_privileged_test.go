//go:build privileged

package vmtest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/internal/multinode"
)

// TestPrivilegedVMIPIPCrossSubnet: node0 and node1 on one subnet, node2
// on another behind the segment's router; an IPIP CrossSubnet pool.
// node0 reaches node1's pods directly (the segment carries the pods'
// own addresses, tunl0's counter stays) and node2's through tunl0 (the
// segment carries protocol 4 between the nodes' addresses), over TCP, UDP
// and ICMP both ways.
func TestPrivilegedVMIPIPCrossSubnet(t *testing.T) {
	c := Start(t, Options{Nodes: 3, SubnetOf: multinode.TwoSubnets})
	pool := netip.MustParsePrefix("10.241.0.0/16")
	createPool(c, "ipip", pool.String(), v3.IPIPModeCrossSubnet, v3.VXLANModeNever)
	c.StartCalicoNode()
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	for _, n := range c.Nodes {
		checkTunl0(t, c, n, pool)
	}
	a, b, x := n0.AddPod("a"), n1.AddPod("b"), n2.AddPod("x")
	eventually(t, time.Minute, "a -> x", func() error { _, err := a.Probe("tcp", x.IP, time.Second); return err })

	var viaTunnel, direct int
	for _, r := range routesTo(t, n0, pool) {
		switch {
		case !strings.Contains(r, " via "):
		case strings.Contains(r, " via "+n2.Addr.Addr().String()+" dev tunl0"):
			viaTunnel++
		case strings.Contains(r, " via "+n1.Addr.Addr().String()+" dev ") && !strings.Contains(r, "tunl0"):
			direct++
		default:
			t.Errorf("node0's route %q: want node1's blocks via %s directly, node2's via %s dev tunl0", r, n1.Addr.Addr(), n2.Addr.Addr())
		}
	}
	if viaTunnel == 0 || direct == 0 {
		t.Errorf("node0's routes to the other blocks: %d over tunl0, %d direct; want both", viaTunnel, direct)
	}

	// Same subnet: plain packets between the pods, nothing through tunl0.
	plain := capturing(t, c, "br0", fmt.Sprintf("host %s and host %s", a.IP, b.IP))
	ipipSame := capturing(t, c, "br0", fmt.Sprintf("ip proto 4 and host %s and host %s", n0.Addr.Addr(), n1.Addr.Addr()))
	tx := txPackets(t, n0, "tunl0")
	allProtocols(t, a, b)
	allProtocols(t, b, a)
	if d := txPackets(t, n0, "tunl0") - tx; d != 0 {
		t.Errorf("node0's tunl0 sent %d packets for same-subnet traffic; want 0", d)
	}
	if got := plain.Stop(); len(got) < 8 {
		t.Errorf("the segment carried %d plain packets between a and b; want every probe's: %q", len(got), got)
	}
	if got := ipipSame.Stop(); len(got) != 0 {
		t.Errorf("IPIP between node0 and node1 (same subnet): %q", got)
	}

	// Across subnets: encapsulated, on both of the segment's subnets.
	ipipCross := capturing(t, c, "br1", fmt.Sprintf("ip proto 4 and host %s and host %s", n0.Addr.Addr(), n2.Addr.Addr()))
	plainCross := capturing(t, c, "br1", fmt.Sprintf("not ip proto 4 and host %s and host %s", a.IP, x.IP))
	tx = txPackets(t, n0, "tunl0")
	allProtocols(t, a, x)
	allProtocols(t, x, a)
	if d := txPackets(t, n0, "tunl0") - tx; d < 3 {
		t.Errorf("node0's tunl0 sent %d packets for cross-subnet traffic; want each probe's", d)
	}
	if got := ipipCross.Stop(); len(got) < 8 {
		t.Errorf("the segment carried %d IPIP packets between node0 and node2; want every probe's: %q", len(got), got)
	}
	if got := plainCross.Stop(); len(got) != 0 {
		t.Errorf("unencapsulated packets between a and x across subnets: %q", got)
	}
}

func capturing(t *testing.T, c *Cluster, iface, filter string) *Capture {
	t.Helper()
	cp, err := c.Seg.Capture(iface, filter)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
