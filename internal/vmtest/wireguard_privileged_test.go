//go:build privileged

package vmtest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestPrivilegedVMWireguard: two VMs on Debian's kernel (which has
// WireGuard), a VXLAN pool and wireguardEnabled. Each felix creates
// wireguard.cali (MTU 1440: the underlay's 1500 less WireGuard's 60,
// also the pods' MTU file), publishes its public key on its Node, and
// peers with the other; pod traffic between the nodes then crosses the
// segment only as UDP between the nodes' WireGuard ports: a capture sees
// no packet carrying a pod address and no VXLAN. Then node1's calico-node
// restarts with its device (and so its private key) gone: a new key is
// published and the pods reach each other again (time measured).
func TestPrivilegedVMWireguard(t *testing.T) {
	c := Start(t, Options{Nodes: 2})
	pool := netip.MustParsePrefix("10.242.0.0/16")
	createPool(c, "vxlan", pool.String(), v3.IPIPModeNever, v3.VXLANModeAlways)
	c.Create(&v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration}, ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v3.FelixConfigurationSpec{WireguardEnabled: new(true)}})
	c.StartCalicoNode()
	n0, n1 := c.Nodes[0], c.Nodes[1]
	keys := map[string]string{}
	for _, n := range c.Nodes {
		eventually(t, time.Minute, n.Name+"'s public key on its Node", func() error {
			st := nodeResource(t, c, n.Name).Status
			if st == nil || st.WireguardPublicKey == "" {
				return fmt.Errorf("no status.wireguardPublicKey")
			}
			keys[n.Name] = st.WireguardPublicKey
			return nil
		})
		if out := n.MustExec("ip", "-d", "link", "show", "dev", "wireguard.cali"); !strings.Contains(out, "mtu 1440 ") || !strings.Contains(out, "wireguard") {
			t.Errorf("%s's wireguard.cali: %s; want a wireguard device with mtu 1440", n.Name, out)
		}
		if got := strings.TrimSpace(n.MustExec("cat", "/var/lib/calico/mtu")); got != "1440" {
			t.Errorf("%s's /var/lib/calico/mtu = %q, want 1440 (1500 - WireGuard's 60)", n.Name, got)
		}
		if out := n.MustExec("ip", "rule"); !strings.Contains(out, "99:\tnot from all fwmark 0x100000/0x100000 lookup 1") {
			t.Errorf("%s's rules lack Calico's WireGuard rule:\n%s", n.Name, out)
		}
	}
	a, b := n0.AddPod("a"), n1.AddPod("b")
	eventually(t, time.Minute, "a -> b", func() error { _, err := a.Probe("tcp", b.IP, time.Second); return err })
	assertEncrypted(t, c, a, b)

	// Key change: node1's calico-node restarts without its device.
	n1.MustExec("sh", "-c", "kill $(pidof calico-node); while pidof calico-node >/dev/null; do sleep 0.1; done")
	n1.MustExec("ip", "link", "del", "wireguard.cali")
	start := time.Now()
	if err := n1.Spawn("calico-node", n1.CalicoNodeEnv(), "calico-node"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "node1's new key published", func() error {
		if k := nodeResource(t, c, n1.Name).Status.WireguardPublicKey; k == keys[n1.Name] || k == "" {
			return fmt.Errorf("key %q", k)
		}
		return nil
	})
	published := time.Since(start)
	eventually(t, time.Minute, "a -> b after node1's key changed", func() error {
		_, err := a.Probe("tcp", b.IP, time.Second)
		return err
	})
	t.Logf("key change: node1 restarted without its device; new key published after %v, a -> b again after %v (in the VMs, machine loaded)",
		published.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	assertEncrypted(t, c, a, b)
}

// assertEncrypted runs every protocol both ways between a and b and
// checks the segment carried them only as WireGuard between the nodes.
func assertEncrypted(t *testing.T, c *Cluster, a, b *Pod) {
	t.Helper()
	n0, n1 := a.Node, b.Node
	clear := capturing(t, c, "br0", fmt.Sprintf("host %s or host %s or udp port 4789", a.IP, b.IP))
	wg := capturing(t, c, "br0", fmt.Sprintf("udp port 51820 and host %s and host %s", n0.Addr.Addr(), n1.Addr.Addr()))
	tx := txPackets(t, n0, "wireguard.cali")
	allProtocols(t, a, b)
	allProtocols(t, b, a)
	if d := txPackets(t, n0, "wireguard.cali") - tx; d < 3 {
		t.Errorf("node0's wireguard.cali sent %d packets; want each probe's", d)
	}
	if got := clear.Stop(); len(got) != 0 {
		t.Errorf("pod addresses or VXLAN in clear on the segment: %q", got)
	}
	if got := wg.Stop(); len(got) < 12 {
		t.Errorf("the segment carried %d WireGuard packets between the nodes; want every probe's: %q", len(got), got)
	}
}
