//go:build privileged

package vmtest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestPrivilegedVMIPIPAlways: two VMs on Debian's kernel, one subnet, an
// IPIP Always pool. calico-node gives each tunl0 the tunnel address IPAM
// allocated (recorded on its Node), the pod MTU is the underlay's minus
// IPIP's 20, pods reach each other over TCP, UDP and ICMP through tunl0
// (its counters move, the segment carries protocol 4 between the nodes),
// and the pool switched IPIP -> VXLAN -> IPIP leaves nothing stale.
func TestPrivilegedVMIPIPAlways(t *testing.T) {
	c := Start(t, Options{Nodes: 2})
	pool := netip.MustParsePrefix("10.240.0.0/16")
	createPool(c, "ipip", pool.String(), v3.IPIPModeAlways, v3.VXLANModeNever)
	c.StartCalicoNode()
	n0, n1 := c.Nodes[0], c.Nodes[1]

	for _, n := range c.Nodes {
		checkTunl0(t, c, n, pool)
		// The first tunl0 on a fresh kernel: the ipip module loads with the
		// request and brings its own tunl0 (felix once failed on EEXIST
		// there and synced only on a retry).
		if log := n.Log("calico-node"); strings.Contains(log, "route sync failed") {
			t.Errorf("%s's felix failed a route sync:\n%s", n.Name, grepLines(log, "route sync failed"))
		}
		if got := strings.TrimSpace(n.MustExec("cat", "/var/lib/calico/mtu")); got != "1480" {
			t.Errorf("%s's /var/lib/calico/mtu = %q, want 1480 (1500 - IPIP's 20)", n.Name, got)
		}
	}
	a := n0.AddPod("a")
	start := time.Now()
	b := n1.AddPod("b")
	var tries int
	eventually(t, time.Minute, "a -> b after b's ADD", func() error {
		tries++
		_, err := a.Probe("tcp", b.IP, time.Second)
		return err
	})
	t.Logf("ADD -> reachable across nodes (IPIP, in the VMs): %v (ADD %v, %d probes)", time.Since(start).Round(time.Millisecond), b.Add, tries)

	for _, p := range []*Pod{a, b} {
		if out := p.Node.MustExec("ip", "netns", "exec", "pod-"+p.Name, "ip", "-o", "link", "show", "dev", "eth0"); !strings.Contains(out, "mtu 1480 ") {
			t.Errorf("pod %s's eth0: %s; want mtu 1480", p.Name, out)
		}
	}
	for _, r := range routesTo(t, n0, pool) {
		if strings.Contains(r, "via") && !strings.Contains(r, "via "+n1.Addr.Addr().String()+" dev tunl0") {
			t.Errorf("node0's route %q: want node1's blocks via %s dev tunl0", r, n1.Addr.Addr())
		}
	}
	capture, err := c.Seg.Capture("br0", fmt.Sprintf("ip proto 4 and host %s and host %s", n0.Addr.Addr(), n1.Addr.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	before := txPackets(t, n0, "tunl0")
	allProtocols(t, a, b)
	allProtocols(t, b, a)
	// The largest datagram that fits the pod MTU with Don't Fragment:
	// 1480 - 20 (IP) - 8 (UDP). On the wire with IPIP it is 1500.
	if _, err := a.ProbeSize("udp", b.IP, 1452, 3*time.Second); err != nil {
		t.Errorf("a 1452-byte UDP payload (DF) a -> b: %v", err)
	}
	if _, err := a.ProbeSize("udp", b.IP, 1453, 3*time.Second); err == nil {
		t.Errorf("a 1453-byte UDP payload with DF went through a 1480-byte pod MTU")
	}
	encapsulated := capture.Stop()
	if after := txPackets(t, n0, "tunl0"); after < before+4 {
		t.Errorf("node0's tunl0 sent %d packets during the probes; want them all through the tunnel", after-before)
	}
	if len(encapsulated) < 8 {
		t.Errorf("the segment carried %d IPIP packets between the nodes; want every probe's: %q", len(encapsulated), encapsulated)
	}

	poolSwitch(t, c, pool, a, b)
}

// checkTunl0: the Node records an IPIP tunnel address from the pool and
// the node's tunl0 holds exactly it.
func checkTunl0(t *testing.T, c *Cluster, n *Node, pool netip.Prefix) {
	t.Helper()
	var addr string
	eventually(t, time.Minute, n.Name+"'s tunl0 address", func() error {
		addr = nodeResource(t, c, n.Name).Spec.BGP.IPv4IPIPTunnelAddr
		if addr == "" {
			return fmt.Errorf("no bgp.ipv4IPIPTunnelAddr")
		}
		out := n.MustExec("ip", "-4", "-o", "addr", "show", "dev", "tunl0")
		if !strings.Contains(out, " "+addr+"/32 ") {
			return fmt.Errorf("tunl0 holds %q, want %s/32", out, addr)
		}
		return nil
	})
	if a, err := netip.ParseAddr(addr); err != nil || !pool.Contains(a) {
		t.Errorf("%s's IPIP tunnel address %q is not from the pool %s", n.Name, addr, pool)
	}
	if out := n.MustExec("ip", "-o", "link", "show", "dev", "tunl0"); !strings.Contains(out, "mtu 1480 ") || !strings.Contains(out, ",UP") {
		t.Errorf("%s's tunl0: %s; want up with mtu 1480", n.Name, out)
	}
}
