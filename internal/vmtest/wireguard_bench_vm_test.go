//go:build privileged && vm

package vmtest

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestPrivilegedWireguardThroughputOnVMs (make bench-wireguard): two VMs, a
// VXLAN pool; TCP throughput between pods on the two nodes over VXLAN,
// then with wireguardEnabled set live (felix restarts with it, as Calico's
// does on that change) over WireGuard, in the same run. A stream running
// across the switch is reported: it survives or how it ends.
func TestPrivilegedWireguardThroughputOnVMs(t *testing.T) {
	c := Start(t, Options{Nodes: 2})
	pool := netip.MustParsePrefix("10.243.0.0/16")
	createPool(c, "vxlan", pool.String(), v3.IPIPModeNever, v3.VXLANModeAlways)
	c.StartCalicoNode()
	n0, n1 := c.Nodes[0], c.Nodes[1]
	a, b := n0.AddPod("a"), n1.AddPod("b")
	eventually(t, time.Minute, "a -> b", func() error { _, err := a.Probe("tcp", b.IP, time.Second); return err })
	measure := func(what string) {
		for i := 0; i < 3; i++ {
			n, took, err := a.Stream(b.IP, 5*time.Second)
			if err != nil {
				t.Fatalf("%s stream: %v", what, err)
			}
			t.Logf("%s: %.0f Mbit/s (%d bytes in %v; VMs on a shared, loaded machine)", what,
				float64(n)*8/took.Seconds()/1e6, n, took.Round(time.Millisecond))
		}
	}
	measure("VXLAN")

	// Enable WireGuard with a stream running.
	streamDone := make(chan string, 1)
	go func() {
		n, took, err := a.Stream(b.IP, 40*time.Second)
		streamDone <- fmt.Sprintf("%d bytes in %v, err %v", n, took.Round(time.Millisecond), err)
	}()
	time.Sleep(3 * time.Second)
	switched := time.Now()
	// calico-node made the default FelixConfiguration at start-up: turn
	// WireGuard on in it.
	r, err := c.Client.Get(context.Background(), datastore.Key{Kind: v3.KindFelixConfiguration, Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	fc := r.(*v3.FelixConfiguration)
	fc.Spec.WireguardEnabled = new(true)
	if _, err := c.Client.Update(context.Background(), fc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "WireGuard carrying a -> b", func() error {
		for _, n := range c.Nodes {
			r, err := c.Client.Get(context.Background(), datastore.Key{Kind: v3.KindNode, Name: n.Name})
			if err != nil {
				return err
			}
			if st := r.(*v3.Node).Status; st == nil || st.WireguardPublicKey == "" {
				return fmt.Errorf("%s has no key yet", n.Name)
			}
		}
		tx := txPackets(t, n0, "wireguard.cali")
		if _, err := a.Probe("tcp", b.IP, time.Second); err != nil {
			return err
		}
		if txPackets(t, n0, "wireguard.cali") == tx {
			return fmt.Errorf("not through wireguard.cali yet")
		}
		return nil
	})
	t.Logf("wireguardEnabled set -> a -> b through WireGuard after %v", time.Since(switched).Round(time.Millisecond))
	t.Logf("stream across the switch: %s", <-streamDone)
	measure("WireGuard")
	checkWireguardAddrs(t, c, pool, b)
}

// checkWireguardAddrs: calico-node gave each device an address from the
// pool once its key was published (Calico's wireguard-tunnel-addr-), and
// node0's own traffic to node1's pod b leaves through the tunnel.
func checkWireguardAddrs(t *testing.T, c *Cluster, pool netip.Prefix, b *Pod) {
	n0 := c.Nodes[0]
	for _, n := range c.Nodes {
		eventually(t, time.Minute, n.Name+"'s WireGuard address", func() error {
			w := nodeResource(t, c, n.Name).Spec.Wireguard
			if w == nil || !pool.Contains(netip.MustParseAddr(w.InterfaceIPv4Address)) {
				return fmt.Errorf("spec.wireguard %+v", w)
			}
			if out := n.MustExec("ip", "-4", "addr", "show", "dev", "wireguard.cali"); !strings.Contains(out, w.InterfaceIPv4Address+"/32") {
				return fmt.Errorf("wireguard.cali: %s", out)
			}
			return nil
		})
	}
	hostClear := capturing(t, c, "br0", fmt.Sprintf("host %s", b.IP))
	eventually(t, 30*time.Second, "node0 -> b (host to remote pod)", func() error {
		_, err := n0.Exec("ping", "-c", "1", "-W", "2", b.IP.String())
		return err
	})
	if got := hostClear.Stop(); len(got) != 0 {
		t.Errorf("node0's ping to b in clear: %q", got)
	}

}
