//go:build privileged && vm

package vmtest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestPrivilegedWireguardThroughputOnVMs (make bench-wireguard): two VMs, a
// VXLAN pool; TCP throughput between pods on the two nodes over VXLAN,
// then with wireguardEnabled set live over WireGuard, then with it unset
// live over VXLAN again, in the same run. felix applies the setting at
// start, as Calico's (whose felix restarts on any FelixConfiguration
// change but four): it restarts inside calico-node. A stream running
// across each switch is reported: whether it survived, and its longest
// stall.
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
			s, err := a.Stream(b.IP, 5*time.Second)
			if err != nil {
				t.Fatalf("%s stream: %v", what, err)
			}
			t.Logf("%s: %.0f Mbit/s (%d bytes in %v)", what, s.Mbits(), s.Bytes, s.Took.Round(time.Millisecond))
		}
	}
	// across runs a stream across a switch of wireguardEnabled to on and
	// reports when a -> b runs over the device (through is whether it
	// should) and how the stream fared.
	across := func(on bool, through func() error) {
		streamDone := make(chan string, 1)
		go func() {
			s, err := a.Stream(b.IP, 40*time.Second)
			streamDone <- fmt.Sprintf("%d bytes in %v (%.0f Mbit/s), longest stall %v, write error %q, err %v", s.Bytes,
				s.Took.Round(time.Millisecond), s.Mbits(), s.MaxGap.Round(time.Millisecond), s.WriteError, err)
		}()
		time.Sleep(3 * time.Second)
		switched := time.Now()
		setFelixConfig(t, c, func(s *v3.FelixConfigurationSpec) { s.WireguardEnabled = new(on) })
		eventually(t, 2*time.Minute, fmt.Sprintf("wireguardEnabled %v in effect for a -> b", on), through)
		t.Logf("wireguardEnabled %v -> in effect for a -> b after %v", on, time.Since(switched).Round(time.Millisecond))
		t.Logf("stream across the switch to %v: %s", on, <-streamDone)
	}
	measure("VXLAN")
	across(true, func() error {
		for _, n := range c.Nodes {
			if st := nodeResource(t, c, n.Name).Status; st == nil || st.WireguardPublicKey == "" {
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
	measure("WireGuard")
	across(false, func() error {
		for _, n := range c.Nodes {
			if _, err := n.Exec("ip", "link", "show", "dev", "wireguard.cali"); err == nil {
				return fmt.Errorf("%s still has wireguard.cali", n.Name)
			}
		}
		_, err := a.Probe("tcp", b.IP, time.Second)
		return err
	})
	measure("VXLAN again")
	t.Logf("calico-node on node0 and node1: PIDs %s / %s (one each: felix restarted inside them)",
		strings.TrimSpace(n0.MustExec("pidof", "calico-node")), strings.TrimSpace(n1.MustExec("pidof", "calico-node")))
}
