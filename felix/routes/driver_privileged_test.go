//go:build privileged

package routes

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// driverNS is a fresh namespace with eth0 (a veth; its peer stays
// inside) at 172.30.1.10/24, a foreign route via a gateway outside every
// pool, and a workload route on a cali interface, both of felix's
// protocol: the driver must leave those alone.
func driverNS(t *testing.T) (ns.NetNS, *netlink.Handle) {
	t.Helper()
	n := netnstest.New(t)
	h, err := netlink.NewHandleAt(netns.NsHandle(int(n.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0-peer"}))
	must(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali12345"}, PeerName: "cali-peer"}))
	for _, name := range []string{"lo", "eth0", "eth0-peer", "cali12345", "cali-peer"} {
		l, err := h.LinkByName(name)
		must(err)
		must(h.LinkSetUp(l))
	}
	eth0, _ := h.LinkByName("eth0")
	addr, _ := netlink.ParseAddr("172.30.1.10/24")
	must(h.AddrAdd(eth0, addr))
	_, foreign, _ := net.ParseCIDR("192.168.50.0/24")
	must(h.RouteAdd(&netlink.Route{Dst: foreign, Gw: net.ParseIP("172.30.1.1"), Protocol: RouteProtocol}))
	cali, _ := h.LinkByName("cali12345")
	_, pod, _ := net.ParseCIDR("10.70.0.5/32")
	must(h.RouteAdd(&netlink.Route{Dst: pod, LinkIndex: cali.Attrs().Index, Scope: netlink.SCOPE_LINK, Protocol: RouteProtocol}))
	return n, h
}

func ipOut(t *testing.T, n ns.NetNS, args ...string) string {
	t.Helper()
	var out []byte
	err := n.Do(func(ns.NetNS) error {
		var err error
		out, err = exec.Command("ip", args...).CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPrivilegedDriverVXLANLifecycle programs VXLAN Always for three
// peers, then CrossSubnet (one route turns direct), then drops a node,
// then switches VXLAN off: each step leaves exactly the desired device,
// routes, ARP and FDB entries, and never touches the foreign and
// workload routes.
func TestPrivilegedDriverVXLANLifecycle(t *testing.T) {
	n, h := driverNS(t)
	dr := NewDriver(h, nil)
	dr.MTUFile = filepath.Join(t.TempDir(), "calico", "mtu")
	pools, nodes := []*v3.IPPool{ippool("10.70.0.0/16", "Never", "Always")}, threeNodes()
	in := Input{ThisNode: "n0", Blocks: threeBlocks()}
	mtuFile := func() string {
		t.Helper()
		b, err := os.ReadFile(dr.MTUFile)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	apply := func() {
		t.Helper()
		in.Cluster = infra.Derive(pools, nodes)
		d, probs := Compute(in)
		if len(probs) != 0 {
			t.Fatalf("problems: %v", probs)
		}
		if _, err := dr.Apply(d); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		// A second Apply finds nothing to do.
		st, err := dr.Apply(d)
		if err != nil || st != (Stats{}) {
			t.Fatalf("second Apply changed %+v, %v; want nothing", st, err)
		}
	}
	foreign := "192.168.50.0/24 via 172.30.1.1 dev eth0"
	workload := "10.70.0.5 dev cali12345 scope link"
	checkRoutes := func(want ...string) {
		t.Helper()
		got := ipOut(t, n, "-4", "route", "show", "proto", "boot")
		want = append(want, foreign, workload)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("route %q missing from:\n%s", w, got)
			}
		}
		if lines := len(strings.Split(got, "\n")); lines != len(want) {
			t.Errorf("%d felix-protocol routes, want %d:\n%s", lines, len(want), got)
		}
	}

	apply()
	dev := ipOut(t, n, "-d", "link", "show", VXLANDevice)
	for _, w := range []string{"vxlan id 4096", "local 172.30.1.10", "dev eth0", "dstport 4789", macA, "mtu 1450"} {
		if !strings.Contains(dev, w) {
			t.Errorf("%s lacks %q:\n%s", VXLANDevice, w, dev)
		}
	}
	if got := ipOut(t, n, "-4", "addr", "show", "dev", VXLANDevice); !strings.Contains(got, "10.70.0.1/32") {
		t.Errorf("VTEP address missing:\n%s", got)
	}
	checkRoutes("10.70.1.0/26 via 10.70.1.1 dev vxlan.calico onlink", "10.70.2.0/26 via 10.70.2.1 dev vxlan.calico onlink")
	if got := mtuFile(); got != "1450" { // eth0's 1500 - VXLAN's 50
		t.Errorf("MTU file %q with VXLAN, want 1450", got)
	}
	neigh := ipOut(t, n, "neigh", "show", "dev", VXLANDevice)
	for _, w := range []string{"10.70.1.1 lladdr " + macB + " PERMANENT", "10.70.2.1 lladdr " + macC + " PERMANENT"} {
		if !strings.Contains(neigh, w) {
			t.Errorf("neighbour %q missing:\n%s", w, neigh)
		}
	}
	fdb := bridgeFDB(t, n)
	for _, w := range []string{macB + " dst 172.30.1.11", macC + " dst 172.30.2.12"} {
		if !strings.Contains(fdb, w) {
			t.Errorf("FDB entry %q missing:\n%s", w, fdb)
		}
	}

	pools[0].Spec.VXLANMode = "CrossSubnet"
	apply()
	checkRoutes("10.70.1.0/26 via 172.30.1.11 dev eth0", "10.70.2.0/26 via 10.70.2.1 dev vxlan.calico onlink")

	nodes = nodes[:2] // n2 deleted
	apply()
	checkRoutes("10.70.1.0/26 via 172.30.1.11 dev eth0")
	if got := ipOut(t, n, "neigh", "show", "dev", VXLANDevice); strings.Contains(got, "10.70.2.1") {
		t.Errorf("the deleted node's neighbour is left:\n%s", got)
	}
	if got := bridgeFDB(t, n); strings.Contains(got, macC) {
		t.Errorf("the deleted node's FDB entry is left:\n%s", got)
	}

	pools[0].Spec.VXLANMode = "Never"
	apply()
	checkRoutes()
	if got := mtuFile(); got != "1500" {
		t.Errorf("MTU file %q without encapsulation, want 1500", got)
	}
	if got := ipOut(t, n, "link", "show"); strings.Contains(got, VXLANDevice) {
		t.Errorf("%s left after VXLAN was switched off:\n%s", VXLANDevice, got)
	}

	// The pool is deleted while a route into it is still there (say from
	// before a restart of the pool): the route is still recognised as
	// felix's through the pools seen.
	pools[0].Spec.VXLANMode = "CrossSubnet"
	apply()
	pools = nil
	apply()
	checkRoutes()
}

func bridgeFDB(t *testing.T, n ns.NetNS) string {
	t.Helper()
	var out []byte
	err := n.Do(func(ns.NetNS) error {
		var err error
		out, err = exec.Command("bridge", "fdb", "show", "dev", VXLANDevice).CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("bridge fdb: %v: %s", err, out)
	}
	return string(out)
}

// TestPrivilegedDriverVXLANv6: an IPv6 VXLAN pool gets vxlan-v6.calico
// with the v6 VTEP, its routes, NDP and FDB entries; switching it off
// removes all of it.
func TestPrivilegedDriverVXLANv6(t *testing.T) {
	n, h := driverNS(t)
	eth0, _ := h.LinkByName("eth0")
	addr, _ := netlink.ParseAddr("fd00:30:1::10/64")
	addr.Flags = unix.IFA_F_NODAD
	if err := h.AddrAdd(eth0, addr); err != nil {
		t.Fatal(err)
	}
	nodes := threeNodes()
	for i, nd := range nodes {
		nd.Spec.BGP.IPv6Address = []string{"fd00:30:1::10/64", "fd00:30:1::11/64", "fd00:30:2::12/64"}[i]
		nd.Spec.IPv6VXLANTunnelAddr = []string{"fd00:70::1", "fd00:70:0:1::1", "fd00:70:0:2::1"}[i]
	}
	aff := func(n string) *string { s := "host:" + n; return &s }
	blocks := []*v3.IPAMBlock{{Spec: v3.IPAMBlockSpec{CIDR: "fd00:70:0:1::/122", Affinity: aff("n1")}},
		{Spec: v3.IPAMBlockSpec{CIDR: "fd00:70:0:2::/122", Affinity: aff("n2")}}}
	pools := []*v3.IPPool{ippool("fd00:70::/48", "", "Always")}
	in := Input{ThisNode: "n0", Cluster: infra.Derive(pools, nodes), Blocks: blocks}
	dr := NewDriver(h, nil)
	d, probs := Compute(in)
	if len(probs) != 0 {
		t.Fatal(probs)
	}
	if _, err := dr.Apply(d); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if st, err := dr.Apply(d); err != nil || st != (Stats{}) {
		t.Fatalf("second Apply changed %+v, %v", st, err)
	}
	dev := ipOut(t, n, "-d", "link", "show", VXLANDeviceV6)
	for _, w := range []string{"vxlan id 4096", "local fd00:30:1::10", "dstport 4789", "mtu 1430"} {
		if !strings.Contains(dev, w) {
			t.Errorf("%s lacks %q:\n%s", VXLANDeviceV6, w, dev)
		}
	}
	r := ipOut(t, n, "-6", "route", "show", "proto", "boot")
	for _, w := range []string{"fd00:70:0:1::/122 via fd00:70:0:1::1 dev vxlan-v6.calico", "fd00:70:0:2::/122 via fd00:70:0:2::1 dev vxlan-v6.calico"} {
		if !strings.Contains(r, w) {
			t.Errorf("route %q missing:\n%s", w, r)
		}
	}
	neigh := ipOut(t, n, "-6", "neigh", "show", "dev", VXLANDeviceV6)
	if !strings.Contains(neigh, "fd00:70:0:2::1 lladdr "+infra.DefaultVTEPMAC("v6/n2").String()+" PERMANENT") {
		t.Errorf("NDP entry missing:\n%s", neigh)
	}
	var fdb []byte
	_ = n.Do(func(ns.NetNS) error {
		fdb, _ = exec.Command("bridge", "fdb", "show", "dev", VXLANDeviceV6).CombinedOutput()
		return nil
	})
	if !strings.Contains(string(fdb), "dst fd00:30:2::12") {
		t.Errorf("FDB entry missing:\n%s", fdb)
	}
	pools[0].Spec.VXLANMode = "Never"
	in.Cluster = infra.Derive(pools, nodes)
	d, _ = Compute(in)
	if _, err := dr.Apply(d); err != nil {
		t.Fatal(err)
	}
	if got := ipOut(t, n, "link", "show"); strings.Contains(got, VXLANDeviceV6) {
		t.Errorf("%s left:\n%s", VXLANDeviceV6, got)
	}
	if got := ipOut(t, n, "-6", "route", "show", "proto", "boot"); strings.Contains(got, "fd00:70") {
		t.Errorf("v6 routes left:\n%s", got)
	}
}

// TestPrivilegedDriverWorkloadRoutes: a local endpoint's route (the
// CNI's) is kept, restored when missing, and written as the CNI writes it;
// a route on a workload interface that no endpoint explains stays for the
// grace period and then goes; an endpoint whose interface does not exist
// yet is no error.
func TestPrivilegedDriverWorkloadRoutes(t *testing.T) {
	n, h := driverNS(t)
	dr := NewDriver(h, nil)
	now := time.Unix(1000, 0)
	dr.Now = func() time.Time { return now }
	in := Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Never")}, threeNodes()), Workloads: []*v3.WorkloadEndpoint{wep("a", "cali12345", "10.70.0.5/32"), wep("b", "calinothere", "10.70.0.6/32")}}
	apply := func() Stats {
		t.Helper()
		d, probs := Compute(in)
		if len(probs) != 0 {
			t.Fatal(probs)
		}
		st, err := dr.Apply(d)
		if err != nil {
			t.Fatalf("Apply: %v", err)
		}
		return st
	}
	if st := apply(); st.RoutesAdded != 0 || st.RoutesRemoved != 0 {
		t.Errorf("the CNI's route for a known endpoint was touched: %+v", st)
	}
	ipOut(t, n, "route", "del", "10.70.0.5/32", "dev", "cali12345")
	apply()
	if got := ipOut(t, n, "route", "show", "10.70.0.5"); !strings.Contains(got, "dev cali12345") || !strings.Contains(got, "scope link") || !strings.Contains(got, "metric 1024") {
		t.Errorf("missing workload route not restored as the CNI writes it: %q", got)
	}
	ipOut(t, n, "route", "add", "10.70.0.9/32", "dev", "cali12345", "proto", "boot", "scope", "link")
	apply()
	now = now.Add(29 * time.Second)
	apply()
	if got := ipOut(t, n, "route", "show", "10.70.0.9"); got == "" {
		t.Fatal("an unexplained workload route was removed within the grace period")
	}
	now = now.Add(2 * time.Second)
	if st := apply(); st.RoutesRemoved != 1 {
		t.Errorf("after the grace period: %+v, want one route removed", st)
	}
	if got := ipOut(t, n, "route", "show", "10.70.0.9"); got != "" {
		t.Errorf("unexplained workload route left after the grace period: %q", got)
	}
	if got := ipOut(t, n, "route", "show", "10.70.0.5"); got == "" {
		t.Error("the known endpoint's route went too")
	}
}

// TestPrivilegedDriverConntrackOnAddressMove: when a workload address
// moves to another interface (another pod), or its endpoint goes, the
// connections tracked for it are removed; other addresses' stay.
func TestPrivilegedDriverConntrackOnAddressMove(t *testing.T) {
	n, h := driverNS(t)
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cali99999"}, PeerName: "cali99999p"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cali99999", "cali99999p"} {
		l, _ := h.LinkByName(name)
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	dr := NewDriver(h, nil)
	in := Input{ThisNode: "n0", Cluster: infra.Derive(nil, threeNodes()), Workloads: []*v3.WorkloadEndpoint{wep("a", "cali12345", "10.70.0.5/32"), wep("c", "cali99999", "10.70.0.8/32")}}
	apply := func() {
		t.Helper()
		d, _ := Compute(in)
		if _, err := dr.Apply(d); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	flow := func(src, dst string) {
		t.Helper()
		var out []byte
		err := n.Do(func(ns.NetNS) error {
			var err error
			out, err = exec.Command("conntrack", "-I", "-s", src, "-d", dst, "-p", "udp", "--sport", "1000", "--dport", "2000", "--timeout", "100").CombinedOutput()
			return err
		})
		if err != nil {
			t.Fatalf("conntrack -I: %v: %s", err, out)
		}
	}
	flows := func() string {
		t.Helper()
		var out []byte
		_ = n.Do(func(ns.NetNS) error {
			out, _ = exec.Command("conntrack", "-L").CombinedOutput()
			return nil
		})
		return string(out)
	}
	apply()
	flow("10.70.0.5", "192.0.2.7")    // from the pod
	flow("198.51.100.2", "10.70.0.5") // to the pod
	flow("10.70.0.8", "192.0.2.7")    // another pod's
	apply()                           // nothing moved: nothing removed
	if got := flows(); strings.Count(got, "udp") != 3 {
		t.Fatalf("flows removed while nothing moved:\n%s", got)
	}
	in.Workloads[0] = wep("b", "cali99999", "10.70.0.5/32") // the address now belongs to another pod
	apply()
	got := flows()
	if strings.Contains(got, "src=10.70.0.5 ") || strings.Contains(got, "dst=10.70.0.5 ") {
		t.Errorf("flows of the moved address left:\n%s", got)
	}
	if !strings.Contains(got, "src=10.70.0.8 ") {
		t.Errorf("another address's flow was removed:\n%s", got)
	}
	in.Workloads = in.Workloads[:1] // pod c goes
	apply()
	if got := flows(); strings.Contains(got, "10.70.0.8 ") {
		t.Errorf("flows of a gone endpoint left:\n%s", got)
	}
}

// TestPrivilegedDriverConfiguredMTUs: FelixConfiguration's vxlanMTU
// (Driver.VXLANMTU) sets the device's MTU and the pods' MTU in the MTU
// file, instead of the ones derived from eth0.
func TestPrivilegedDriverConfiguredMTUs(t *testing.T) {
	n, h := driverNS(t)
	dr := NewDriver(h, nil)
	dr.MTUFile = filepath.Join(t.TempDir(), "mtu")
	dr.VXLANMTU, dr.IPIPMTU = 1400, 1380
	for _, c := range []struct {
		name, ipip, vxlan, dev, wantDev, wantFile string
	}{
		{"vxlan", "Never", "Always", VXLANDevice, "mtu 1400", "1400"},
		// ipipMTU is not driven here: this kernel has no ipip module.
	} {
		d, probs := Compute(Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", v3.IPIPMode(c.ipip), v3.VXLANMode(c.vxlan))}, threeNodes()), Blocks: threeBlocks()})
		if len(probs) != 0 {
			t.Fatalf("%s: problems: %v", c.name, probs)
		}
		if _, err := dr.Apply(d); err != nil {
			t.Fatalf("%s: Apply: %v", c.name, err)
		}
		if dev := ipOut(t, n, "link", "show", c.dev); !strings.Contains(dev, c.wantDev) {
			t.Errorf("%s: %s lacks %q:\n%s", c.name, c.dev, c.wantDev, dev)
		}
		if b, err := os.ReadFile(dr.MTUFile); err != nil || string(b) != c.wantFile {
			t.Errorf("%s: MTU file %q (%v), want %s", c.name, b, err, c.wantFile)
		}
	}
}
