//go:build privileged

package vmtest

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/vmtest/guest"
)

// TestPrivilegedVMWireguard: two VMs on Debian's kernel (which has
// WireGuard) running calico-node with the bird backend, one pool and
// wireguardEnabled. Each felix creates wireguard.cali (MTU 1440: the
// underlay's 1500 less WireGuard's 60, also the pods' MTU file),
// publishes its public key on its Node, and peers with the other. A host
// endpoint on each underlay NIC has a policy that would drop WireGuard's
// UDP: felix's WireGuard rules admit it first. With the pool in BGP (no
// encapsulation), then IPIP, then VXLAN mode, pod traffic between the
// nodes crosses the segment only as UDP between the nodes' WireGuard
// ports: a capture sees no packet carrying a pod address, no IPIP and no
// VXLAN. The devices have addresses from the pool and the node's own
// traffic to a remote pod goes through the tunnel.
// wireguardHostEncryptionEnabled set live (felix restarts inside
// calico-node; calico-node and BIRD keep their PIDs): the nodes' own
// traffic to each other is encrypted too. node1's calico-node restarted
// with its device (and so its private key) gone: a new key is published
// and the pods reach each other again (time measured). wireguardEnabled
// false: devices, rule and keys gone, the pods reach each other in clear
// (VXLAN, past the host endpoints through felix's tunnel rules).
func TestPrivilegedVMWireguard(t *testing.T) {
	c := Start(t, Options{Nodes: 2, Backend: "bird"})
	pool := netip.MustParsePrefix("10.242.0.0/16")
	createPool(c, "wg", pool.String(), v3.IPIPModeNever, v3.VXLANModeNever)
	c.Create(&v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration}, ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v3.FelixConfigurationSpec{WireguardEnabled: new(true)}})
	c.StartCalicoNode()
	n0, n1 := c.Nodes[0], c.Nodes[1]
	keys := map[string]string{}
	for _, n := range c.Nodes {
		keys[n.Name] = waitKey(t, c, n, "")
		if out := n.MustExec("ip", "-d", "link", "show", "dev", "wireguard.cali"); !strings.Contains(out, "mtu 1440 ") || !strings.Contains(out, "wireguard") {
			t.Errorf("%s's wireguard.cali: %s; want a wireguard device with mtu 1440", n.Name, out)
		}
		if got := strings.TrimSpace(n.MustExec("cat", "/var/lib/calico/mtu")); got != "1440" {
			t.Errorf("%s's /var/lib/calico/mtu = %q, want 1440 (1500 - WireGuard's 60)", n.Name, got)
		}
		if out := n.MustExec("ip", "rule"); !strings.Contains(out, "99:\tnot from all fwmark 0x100000/0x100000 lookup 1") {
			t.Errorf("%s's rules lack Calico's WireGuard rule:\n%s", n.Name, out)
		}
		rules := n.MustExec("iptables-save", "-t", "filter")
		for _, want := range []string{"Allow incoming IPv4 Wireguard packets", "Allow outgoing IPv4 Wireguard packets"} {
			if !strings.Contains(rules, want) {
				t.Errorf("%s's filter table lacks %q", n.Name, want)
			}
		}
	}
	a, b := n0.AddPod("a"), n1.AddPod("b")
	underlayHostEndpoints(t, c)
	eventually(t, time.Minute, "host endpoint policy on ens3 (node1 -> node0 ping dropped)", func() error {
		if _, err := n1.Exec("ping", "-c", "1", "-W", "1", n0.Addr.Addr().String()); err == nil {
			return fmt.Errorf("the ping went through")
		}
		return nil
	})
	for _, mode := range []struct {
		name  string
		ipip  v3.IPIPMode
		vxlan v3.VXLANMode
		held  func(encapState) bool
	}{
		{"BGP", v3.IPIPModeNever, v3.VXLANModeNever, func(s encapState) bool { return !s.tunl0Addr && !s.vxlanDev }},
		{"IPIP", v3.IPIPModeAlways, v3.VXLANModeNever, func(s encapState) bool { return s.tunl0Addr && s.tunl0Up && s.ipipRule }},
		{"VXLAN", v3.IPIPModeNever, v3.VXLANModeAlways, func(s encapState) bool { return s.vxlanDev && s.vxlanRule && !s.tunl0Addr }},
	} {
		start := time.Now()
		setPoolModes(t, c, "wg", mode.ipip, mode.vxlan)
		for _, n := range c.Nodes {
			eventually(t, 2*time.Minute, mode.name+" on "+n.Name, func() error {
				if s := readEncap(t, n, pool); !mode.held(s) {
					return fmt.Errorf("%+v", s)
				}
				return nil
			})
		}
		eventually(t, time.Minute, mode.name+": a -> b", func() error { _, err := a.Probe("tcp", b.IP, time.Second); return err })
		assertEncrypted(t, c, a, b)
		t.Logf("%s pool: converged, pod traffic only WireGuard on the segment (%v)", mode.name, time.Since(start).Round(time.Millisecond))
	}

	checkWireguardAddrs(t, c, pool, b)
	hostEncryption(t, c)

	// Key change: node1's calico-node restarts without its device.
	n1.MustExec("sh", "-c", "kill $(pidof calico-node); while pidof calico-node >/dev/null; do sleep 0.1; done")
	n1.MustExec("ip", "link", "del", "wireguard.cali")
	start := time.Now()
	if err := n1.Spawn("calico-node", n1.CalicoNodeEnv(), "calico-node"); err != nil {
		t.Fatal(err)
	}
	keys[n1.Name] = waitKey(t, c, n1, keys[n1.Name])
	published := time.Since(start)
	eventually(t, time.Minute, "a -> b after node1's key changed", func() error {
		_, err := a.Probe("tcp", b.IP, time.Second)
		return err
	})
	t.Logf("key change: node1 restarted without its device; new key published after %v, a -> b again after %v (in the VMs)",
		published.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	assertEncrypted(t, c, a, b)

	// Disabled live: everything of WireGuard goes, traffic flows in clear
	// (VXLAN, admitted past the host endpoints by felix's tunnel rules).
	start = time.Now()
	setFelixConfig(t, c, func(s *v3.FelixConfigurationSpec) { s.WireguardEnabled = new(false) })
	for _, n := range c.Nodes {
		eventually(t, time.Minute, n.Name+" without WireGuard", func() error {
			if _, err := n.Exec("ip", "link", "show", "dev", "wireguard.cali"); err == nil {
				return fmt.Errorf("wireguard.cali still there")
			}
			if out := n.MustExec("ip", "rule"); strings.Contains(out, "lookup 1") {
				return fmt.Errorf("WireGuard's rule still there:\n%s", out)
			}
			if st := nodeResource(t, c, n.Name).Status; st != nil && st.WireguardPublicKey != "" {
				return fmt.Errorf("key still published")
			}
			return nil
		})
	}
	eventually(t, time.Minute, "a -> b without WireGuard", func() error { _, err := a.Probe("tcp", b.IP, time.Second); return err })
	allProtocols(t, a, b)
	t.Logf("wireguardEnabled false: devices, rules and keys gone, a -> b in clear after %v", time.Since(start).Round(time.Millisecond))
}

// hostEncryption turns wireguardHostEncryptionEnabled on (felix applies it
// at start: it restarts inside calico-node, which keeps running with its
// BIRD) and checks that node0's own traffic to node1 crosses the segment
// only as WireGuard.
func hostEncryption(t *testing.T, c *Cluster) {
	t.Helper()
	n0, n1 := c.Nodes[0], c.Nodes[1]
	pids := func(n *Node) string {
		return strings.TrimSpace(n.MustExec("sh", "-c", "echo $(pidof calico-node) $(pidof bird)"))
	}
	before := []string{pids(n0), pids(n1)}
	setFelixConfig(t, c, func(s *v3.FelixConfigurationSpec) { s.WireguardHostEncryptionEnabled = new(true) })
	start := time.Now()
	for _, n := range c.Nodes {
		eventually(t, time.Minute, n.Name+"'s raw WireGuard mark (host encryption)", func() error {
			if grepLines(grepLines(n.MustExec("iptables-save", "-t", "raw"), "-A cali-PREROUTING "), "-j cali-wireguard-incoming-mark") == "" {
				return fmt.Errorf("no jump to cali-wireguard-incoming-mark")
			}
			return nil
		})
	}
	eventually(t, time.Minute, "node0 -> node1 (host) through wireguard.cali", func() error {
		tx := txPackets(t, n0, "wireguard.cali")
		if _, err := n0.Exec("ping", "-c", "1", "-W", "2", n1.Addr.Addr().String()); err != nil {
			return err
		}
		if txPackets(t, n0, "wireguard.cali") == tx {
			return fmt.Errorf("not through wireguard.cali")
		}
		return nil
	})
	t.Logf("wireguardHostEncryptionEnabled set -> host traffic through WireGuard after %v", time.Since(start).Round(time.Millisecond))
	if after := []string{pids(n0), pids(n1)}; after[0] != before[0] || after[1] != before[1] {
		t.Errorf("calico-node and BIRD PIDs (node0, node1) %q before, %q after: felix must restart inside calico-node", before, after)
	}
	clear := capturing(t, c, "br0", fmt.Sprintf("ip and host %s and host %s and not udp port 51820", n0.Addr.Addr(), n1.Addr.Addr()))
	wg := capturing(t, c, "br0", fmt.Sprintf("udp port 51820 and host %s and host %s", n0.Addr.Addr(), n1.Addr.Addr()))
	n0.MustExec("ping", "-c", "3", "-i", "0.2", "-W", "2", n1.Addr.Addr().String())
	n1.MustExec("ping", "-c", "3", "-i", "0.2", "-W", "2", n0.Addr.Addr().String())
	if got := clear.Stop(); len(got) != 0 {
		t.Errorf("host traffic between the nodes in clear with host encryption: %q", got)
	}
	if got := wg.Stop(); len(got) < 6 {
		t.Errorf("the segment carried %d WireGuard packets for 3 pings each way; want at least each request: %q", len(got), got)
	}
}

// waitKey waits until n's Node carries a WireGuard public key other than
// old and returns it.
func waitKey(t *testing.T, c *Cluster, n *Node, old string) string {
	t.Helper()
	var key string
	eventually(t, time.Minute, n.Name+"'s public key on its Node", func() error {
		st := nodeResource(t, c, n.Name).Status
		if st == nil || st.WireguardPublicKey == "" || st.WireguardPublicKey == old {
			return fmt.Errorf("status.wireguardPublicKey %+v", st)
		}
		key = st.WireguardPublicKey
		return nil
	})
	return key
}

// setFelixConfig changes the default FelixConfiguration (calico-node
// made it at start-up, or the test did).
func setFelixConfig(t *testing.T, c *Cluster, change func(*v3.FelixConfigurationSpec)) {
	t.Helper()
	r, err := c.Client.Get(context.Background(), datastore.Key{Kind: v3.KindFelixConfiguration, Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	fc := r.(*v3.FelixConfiguration)
	change(&fc.Spec)
	if _, err := c.Client.Update(context.Background(), fc); err != nil {
		t.Fatal(err)
	}
}

// assertEncrypted runs every protocol both ways between a and b and
// checks the segment carried them only as WireGuard between the nodes:
// no pod address, IPIP or VXLAN in clear.
func assertEncrypted(t *testing.T, c *Cluster, a, b *Pod) {
	t.Helper()
	n0, n1 := a.Node, b.Node
	clear := capturing(t, c, "br0", fmt.Sprintf("host %s or host %s or udp port 4789 or ip proto 4", a.IP, b.IP))
	wg := capturing(t, c, "br0", fmt.Sprintf("udp port 51820 and host %s and host %s", n0.Addr.Addr(), n1.Addr.Addr()))
	tx := txPackets(t, n0, "wireguard.cali")
	allProtocols(t, a, b)
	allProtocols(t, b, a)
	if d := txPackets(t, n0, "wireguard.cali") - tx; d < 3 {
		t.Errorf("node0's wireguard.cali sent %d packets; want each probe's", d)
	}
	if got := clear.Stop(); len(got) != 0 {
		t.Errorf("pod addresses, IPIP or VXLAN in clear on the segment: %q", got)
	}
	if got := wg.Stop(); len(got) < 12 {
		t.Errorf("the segment carried %d WireGuard packets between the nodes; want every probe's: %q", len(got), got)
	}
}

// checkWireguardAddrs: calico-node gave each device an address from the
// pool once its key was published (Calico's wireguard-tunnel-addr-), and
// node0's own traffic to node1's pod b leaves through the tunnel.
func checkWireguardAddrs(t *testing.T, c *Cluster, pool netip.Prefix, b *Pod) {
	t.Helper()
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

// underlayHostEndpoints puts a host endpoint on each node's underlay NIC
// (ens3) under a policy that admits only the guest agent's control port
// in and TCP out: WireGuard's UDP (and VXLAN, IPIP) crosses it only
// through felix's cali-INPUT/cali-OUTPUT rules for them, which come
// before host endpoint policy (failsafe ports keep etcd and BGP).
func underlayHostEndpoints(t *testing.T, c *Cluster) {
	t.Helper()
	tcp := numorstring.ProtocolFromString("TCP")
	for _, n := range c.Nodes {
		c.Create(&v3.HostEndpoint{TypeMeta: metav1.TypeMeta{Kind: v3.KindHostEndpoint},
			ObjectMeta: metav1.ObjectMeta{Name: n.Name + "-ens3", Labels: map[string]string{"underlay": "true"}},
			Spec:       v3.HostEndpointSpec{Node: n.Name, InterfaceName: "ens3", ExpectedIPs: []string{n.Addr.Addr().String()}}})
	}
	c.Create(&v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy}, ObjectMeta: metav1.ObjectMeta{Name: "underlay"},
		Spec: v3.GlobalNetworkPolicySpec{Selector: "underlay == 'true'", Types: []v3.PolicyType{v3.PolicyTypeIngress, v3.PolicyTypeEgress},
			Ingress: []v3.Rule{{Action: v3.Allow, Protocol: &tcp, Destination: v3.EntityRule{Ports: []numorstring.Port{numorstring.SinglePort(guest.ControlPort)}}}},
			Egress:  []v3.Rule{{Action: v3.Allow, Protocol: &tcp}}}})
}
