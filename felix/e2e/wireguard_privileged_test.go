//go:build privileged && integration

package e2e

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam"
)

// TestPrivilegedWireguardUnsupportedNotReady: on this machine's kernel
// (no wireguard module: `ip link add type wireguard` fails) felix with
// wireguardEnabled is not ready, naming the reason, publishes no public
// key, and sends nothing that should be encrypted in clear: a pod's
// packets to another node's pod (whose node publishes a key) are dropped
// by the WireGuard table's blackhole, so not one packet leaves on the
// uplink. With WireGuard disabled again (felix restarts, as on any
// start-time setting) it is ready, the table and rule are gone, and the
// same packets do leave (the probe can see them).
func TestPrivilegedWireguardUnsupportedNotReady(t *testing.T) {
	e := testservers.StartEtcd(t)
	c := etcdClient(t, e)
	ctx := context.Background()
	remoteKey, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{Kind: kind, APIVersion: "projectcalico.org/v3"}
	}
	objs := []v3.Resource{
		&v3.Node{TypeMeta: tm(v3.KindNode), ObjectMeta: metav1.ObjectMeta{Name: node},
			Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "192.168.200.1/24"}}},
		&v3.Node{TypeMeta: tm(v3.KindNode), ObjectMeta: metav1.ObjectMeta{Name: "node2"},
			Spec:   v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "192.168.200.2/24"}},
			Status: &v3.NodeStatus{WireguardPublicKey: remoteKey.PublicKey().String()}},
		&v3.IPPool{TypeMeta: tm(v3.KindIPPool), ObjectMeta: metav1.ObjectMeta{Name: "pool"},
			Spec: v3.IPPoolSpec{CIDR: "10.65.0.0/16", BlockSize: 26, IPIPMode: v3.IPIPModeNever, VXLANMode: v3.VXLANModeNever, NodeSelector: "all()"}},
		ipam.NewBlock(netip.MustParsePrefix("10.65.0.0/26"), node, metav1.Now()),
		ipam.NewBlock(netip.MustParsePrefix("10.65.1.0/26"), "node2", metav1.Now()),
		ct.NSProfile("dev", nil),
	}
	nodeNS := newNode(t)
	pod := newPod(t, nodeNS, "pod", "caliwg01", "10.65.0.5")
	objs = append(objs, ct.WEP("dev", "pod", node, pod.iface, pod.ip.String(), nil))
	for _, r := range objs {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatalf("creating %T: %v", r, err)
		}
	}
	// No IPv6 chatter on the uplink: its packet counter is the probe.
	for _, k := range []string{"net/ipv6/conf/uplink/disable_ipv6", "net/ipv6/conf/uplink-peer/disable_ipv6"} {
		if err := nodeNS.Do(func(ns.NetNS) error { return writeSysctl(k, "1") }); err != nil {
			t.Fatal(err)
		}
	}
	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{WireguardEnabled: new(true)})
	f := startRealFelixWith(t, e.Endpoint(), nodeNS, nil, true)
	defer func() {
		if t.Failed() {
			t.Log(f.logs.String())
		}
	}()
	var body string
	eventually(t, 40*time.Second, "not ready naming WireGuard", func() bool {
		var code int
		code, body = get(f.health + "/readiness")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "routes: ") &&
			strings.Contains(body, "wireguard.cali: the kernel has no WireGuard")
	})
	t.Logf("readiness: %s", body)
	eventually(t, 20*time.Second, "blackhole for node2's block, throw for ours, Calico's rule", func() bool {
		tbl := nsRun(t, nodeNS, "ip", "route", "show", "table", "1")
		rules := nsRun(t, nodeNS, "ip", "rule")
		return strings.Contains(tbl, "blackhole 10.65.1.0/26") && strings.Contains(tbl, "throw 10.65.0.0/26") &&
			strings.Contains(rules, "99:\tnot from all fwmark 0x100000/0x100000 lookup 1")
	})
	if sent := uplinkPackets(t, nodeNS, func() { udpOK(pod.netns, "10.65.1.5", udpPort) }); sent != 0 {
		t.Errorf("%d packets left on the uplink for another node's pod with WireGuard enabled but impossible", sent)
	}
	if k := nodeKey(t, c, node); k != "" {
		t.Errorf("published public key %q without a WireGuard device", k)
	}

	// Disabled: ready, nothing of WireGuard left, and the probe sees the
	// packets leave (in clear, as without WireGuard).
	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{})
	eventually(t, 40*time.Second, "ready without WireGuard", f.ready)
	eventually(t, 20*time.Second, "table 1 and the rule removed", func() bool {
		return strings.TrimSpace(nsRun(t, nodeNS, "ip", "route", "show", "table", "1")) == "" &&
			!strings.Contains(nsRun(t, nodeNS, "ip", "rule"), "lookup 1")
	})
	if sent := uplinkPackets(t, nodeNS, func() { udpOK(pod.netns, "10.65.1.5", udpPort) }); sent == 0 {
		t.Errorf("the probe saw no packet leave without WireGuard: it cannot tell")
	}
}

// uplinkPackets is how many packets the node's uplink sent during send.
func uplinkPackets(t *testing.T, nodeNS ns.NetNS, send func()) uint64 {
	t.Helper()
	tx := func() uint64 {
		var n uint64
		if err := nodeNS.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName("uplink")
			if err == nil {
				n = l.Attrs().Statistics.TxPackets
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := tx()
	send()
	time.Sleep(500 * time.Millisecond)
	return tx() - before
}

func nodeKey(t *testing.T, c datastore.Client, name string) string {
	t.Helper()
	r, err := c.Get(context.Background(), datastore.Key{Kind: v3.KindNode, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if st := r.(*v3.Node).Status; st != nil {
		return st.WireguardPublicKey
	}
	return ""
}
