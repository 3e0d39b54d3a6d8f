//go:build privileged

package confd_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/confd/bird/birdtest"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/internal/netnstest"
)

type testNode struct {
	name, ip, block, pod string
	rrID                 string
	ns                   ns.NetNS
	podNS                ns.NetNS
	bird                 *birdtest.Daemon
}

func resources(nodes []*testNode, meshOn bool, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: projectcalico.org/v3\nkind: BGPConfiguration\nmetadata: {name: default}\nspec: {nodeToNodeMeshEnabled: %t}\n", meshOn)
	fmt.Fprintf(&b, "---\napiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: pool}\nspec: {cidr: 10.244.0.0/16}\n")
	for _, n := range nodes {
		labels, rr := "{}", ""
		if n.rrID != "" {
			labels, rr = `{route-reflector: "true"}`, ", routeReflectorClusterID: "+n.rrID
		}
		fmt.Fprintf(&b, "---\napiVersion: projectcalico.org/v3\nkind: Node\nmetadata: {name: %s, labels: %s}\nspec: {bgp: {ipv4Address: %s/24%s}}\n", n.name, labels, n.ip, rr)
		if n.block != "" {
			// Named as Calico names affinities (etcd keys them by node and block).
			name := n.name + "-" + strings.NewReplacer(".", "-", "/", "-").Replace(n.block)
			fmt.Fprintf(&b, "---\napiVersion: projectcalico.org/v3\nkind: BlockAffinity\nmetadata: {name: %s}\nspec: {state: confirmed, node: %s, cidr: %s, deleted: false}\n", name, n.name, n.block)
		}
	}
	return b.String() + extra
}

func renderFor(t *testing.T, node, yaml, logFile string) string {
	t.Helper()
	rs, err := v3.DecodeYAML([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	in, err := render.FromResources(node, rs)
	if err != nil {
		t.Fatal(err)
	}
	in.LogFile = logFile
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cluster wires the nodes onto one L2 segment, gives each a "pod" address
// on a dummy interface and starts a BIRD with its rendered config.
func cluster(t *testing.T, nodes []*testNode, yaml string) {
	t.Helper()
	seg := netnstest.New(t)
	birdtest.Bridge(t, seg)
	logDir := t.TempDir()
	for i, n := range nodes {
		n.ns = netnstest.New(t)
		birdtest.Attach(t, seg, n.ns, fmt.Sprintf("s%d", i), n.ip+"/24")
		birdtest.Sysctl(t, n.ns, "net.ipv4.ip_forward", "1")
		// A default route, as real nodes have: proxy ARP for the pods'
		// 169.254.1.1 gateway needs a route to it, and BIRD must learn the
		// default route without announcing it.
		birdtest.MustInNS(t, n.ns, "ip", "route", "add", "default", "via", "10.99.0.254", "dev", "eth0")
		if n.pod != "" {
			n.podNS = netnstest.New(t)
			birdtest.Pod(t, n.ns, n.podNS, "cali"+n.name, n.pod)
		}
	}
	for _, n := range nodes {
		n.bird = birdtest.StartBIRD(t, n.ns, renderFor(t, n.name, yaml, filepath.Join(logDir, n.name+".log")))
	}
}

// waitRoute waits until n's kernel has a `proto bird` route for dst via gw.
func waitRoute(t *testing.T, n *testNode, dst, gw string) {
	t.Helper()
	want := dst + " via " + gw + " "
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := birdtest.MustInNS(t, n.ns, "ip", "route", "show", "proto", "bird")
		if strings.Contains(out, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no proto bird route %q; have:\n%s", n.name, want, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tcpBetweenPods listens on dst's pod address and connects from src's pod
// address; the bytes must make the round trip.
func tcpBetweenPods(t *testing.T, src, dst *testNode) {
	t.Helper()
	var ln net.Listener
	if err := dst.podNS.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(dst.pod, "7000"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	err := src.podNS.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: 3 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src.pod)}}
		c, err := d.Dial("tcp", net.JoinHostPort(dst.pod, "7000"))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		msg := "hello from " + src.pod
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil {
			return err
		}
		if string(buf) != msg {
			return fmt.Errorf("echo %q, want %q", buf, msg)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("TCP %s -> %s: %v", src.pod, dst.pod, err)
	}
}

// TestPrivilegedMeshThreeNodes: three nodes, each with BIRD running its
// rendered config. Mesh sessions establish, every block reaches the other
// nodes as a proto bird route, pod /32s stay local, pods talk over TCP with
// plain routing (no tunnel devices exist), and adding a BGPPeer reconfigures
// node1 without restarting its mesh sessions.
func TestPrivilegedMeshThreeNodes(t *testing.T) {
	nodes := []*testNode{
		{name: "node1", ip: "10.99.0.1", block: "10.244.1.0/26", pod: "10.244.1.2"},
		{name: "node2", ip: "10.99.0.2", block: "10.244.2.0/26", pod: "10.244.2.2"},
		{name: "node3", ip: "10.99.0.3", block: "10.244.3.0/26", pod: "10.244.3.2"},
	}
	yaml := resources(nodes, true, "")
	start := time.Now()
	cluster(t, nodes, yaml)
	sessions := map[string]map[string]bird.Protocol{}
	for _, n := range nodes {
		var names []string
		for _, o := range nodes {
			if o != n {
				names = append(names, "Mesh_"+strings.ReplaceAll(o.ip, ".", "_"))
			}
		}
		sessions[n.name] = n.bird.WaitEstablished(t, 15*time.Second, names...)
	}
	t.Logf("mesh Established on all nodes %v after BIRD start", time.Since(start).Round(time.Millisecond))
	for _, n := range nodes {
		for _, o := range nodes {
			if o != n {
				waitRoute(t, n, o.block, o.ip)
			}
		}
	}
	t.Logf("all blocks routed %v after start", time.Since(start).Round(time.Millisecond))
	if out := birdtest.MustInNS(t, nodes[1].ns, "ip", "route", "show", "proto", "bird"); strings.Contains(out, nodes[0].pod) {
		t.Errorf("node1's pod /32 leaked to node2:\n%s", out)
	} else if strings.Contains(out, "default") {
		t.Errorf("a node's default route was announced:\n%s", out)
	}
	if out := birdtest.MustInNS(t, nodes[0].ns, "ip", "route", "get", nodes[1].pod); !strings.Contains(out, "via 10.99.0.2 dev eth0") {
		t.Errorf("route node1 -> node2 pod is not plain routing over eth0: %s", out)
	}
	tcpBetweenPods(t, nodes[0], nodes[1])
	tcpBetweenPods(t, nodes[2], nodes[0])
	tcpBetweenPods(t, nodes[1], nodes[2])

	// A new BGPPeer on node1 only adds a protocol; mesh sessions keep their uptime.
	drv, err := bird.NewDriver(nodes[0].bird.ConfigPath, nodes[0].bird.Ctl)
	if err != nil {
		t.Fatal(err)
	}
	extra := "---\napiVersion: projectcalico.org/v3\nkind: BGPPeer\nmetadata: {name: tor}\nspec: {node: node1, peerIP: 10.99.0.254, asNumber: 65000}\n"
	t0 := time.Now()
	if err := drv.Apply(context.Background(), renderFor(t, "node1", resources(nodes, true, extra), filepath.Join(t.TempDir(), "n1.log"))); err != nil {
		t.Fatal(err)
	}
	t.Logf("BGPPeer change: render+write+validate+configure took %v", time.Since(t0))
	time.Sleep(500 * time.Millisecond) // a restarted session would now be down or younger
	after, err := nodes[0].bird.Protocols()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after["Node_10_99_0_254"]; !ok {
		t.Errorf("new BGPPeer protocol missing on node1")
	}
	for _, name := range []string{"Mesh_10_99_0_2", "Mesh_10_99_0_3"} {
		b, a := sessions["node1"][name], after[name]
		if !strings.HasPrefix(a.Info, "Established") || a.Since != b.Since {
			t.Errorf("%s restarted by adding a BGPPeer: before %+v after %+v", name, b, a)
		}
	}
	tcpBetweenPods(t, nodes[1], nodes[0])
}

// TestPrivilegedRouteReflector: one RR and two clients, mesh off, all nodes
// peering with the RR by peerSelector. Clients have a session only with the
// RR, yet learn each other's block with the other client as next hop, and
// their pods talk.
func TestPrivilegedRouteReflector(t *testing.T) {
	nodes := []*testNode{
		{name: "rr", ip: "10.99.0.10", rrID: "244.0.0.1"},
		{name: "client1", ip: "10.99.0.1", block: "10.244.1.0/26", pod: "10.244.1.2"},
		{name: "client2", ip: "10.99.0.2", block: "10.244.2.0/26", pod: "10.244.2.2"},
	}
	peer := "---\napiVersion: projectcalico.org/v3\nkind: BGPPeer\nmetadata: {name: peer-with-rr}\nspec: {nodeSelector: all(), peerSelector: \"route-reflector == 'true'\"}\n"
	cluster(t, nodes, resources(nodes, false, peer))
	nodes[0].bird.WaitEstablished(t, 15*time.Second, "Node_10_99_0_1", "Node_10_99_0_2")
	for _, c := range nodes[1:] {
		ps := c.bird.WaitEstablished(t, 15*time.Second, "Node_10_99_0_10")
		for name, p := range ps {
			if p.Proto == "BGP" && name != "Node_10_99_0_10" {
				t.Errorf("%s has a session besides the RR: %+v", c.name, p)
			}
		}
	}
	waitRoute(t, nodes[1], nodes[2].block, nodes[2].ip)
	waitRoute(t, nodes[2], nodes[1].block, nodes[1].ip)
	tcpBetweenPods(t, nodes[1], nodes[2])
	tcpBetweenPods(t, nodes[2], nodes[1])
}

// TestPrivilegedBGPFilterChangeKeepsSession: node1 exports through a
// BGPFilter. Changing the filter's rules changes what node2 learns, but only
// reloads the channel: the session keeps its uptime.
func TestPrivilegedBGPFilterChangeKeepsSession(t *testing.T) {
	nodes := []*testNode{
		{name: "node1", ip: "10.99.0.1", block: "10.244.1.0/26"},
		{name: "node2", ip: "10.99.0.2", block: "10.244.2.0/26"},
	}
	extra := func(rejected string) string {
		return `---
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {name: node1-second}
spec: {state: confirmed, node: node1, cidr: 10.244.1.64/26, deleted: false}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: pair}
spec: {nodeSelector: all(), peerSelector: all(), filters: [no-block]}
---
apiVersion: projectcalico.org/v3
kind: BGPFilter
metadata: {name: no-block}
spec:
  exportV4:
  - {cidr: ` + rejected + `, matchOperator: Equal, action: Reject}
`
	}
	cluster(t, nodes, resources(nodes, false, extra("10.244.1.64/26")))
	before := nodes[0].bird.WaitEstablished(t, 15*time.Second, "Node_10_99_0_2")["Node_10_99_0_2"]
	waitRoute(t, nodes[1], "10.244.1.0/26", nodes[0].ip)
	if out := birdtest.MustInNS(t, nodes[1].ns, "ip", "route", "show", "proto", "bird"); strings.Contains(out, "10.244.1.64/26") {
		t.Fatalf("filtered block reached node2:\n%s", out)
	}

	drv, err := bird.NewDriver(nodes[0].bird.ConfigPath, nodes[0].bird.Ctl)
	if err != nil {
		t.Fatal(err)
	}
	cfg := renderFor(t, "node1", resources(nodes, false, extra("10.244.1.0/26")), filepath.Join(t.TempDir(), "n1.log"))
	if err := drv.Apply(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	waitRoute(t, nodes[1], "10.244.1.64/26", nodes[0].ip)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Contains(birdtest.MustInNS(t, nodes[1].ns, "ip", "route", "show", "proto", "bird"), "10.244.1.0/26") {
		if time.Now().After(deadline) {
			t.Fatal("node2 kept the block the new filter rejects")
		}
		time.Sleep(50 * time.Millisecond)
	}
	after, err := nodes[0].bird.Protocols()
	if err != nil {
		t.Fatal(err)
	}
	if a := after["Node_10_99_0_2"]; !strings.HasPrefix(a.Info, "Established") || a.Since != before.Since {
		t.Errorf("session restarted by a filter change: before %+v after %+v", before, a)
	}
}

// TestPrivilegedDualStack: one BIRD per node runs IPv4 and IPv6 sessions
// from one rendered config; each node's IPv6 block reaches the other node.
func TestPrivilegedDualStack(t *testing.T) {
	nodes := []*testNode{
		{name: "node1", ip: "10.99.0.1", block: "10.244.1.0/26"},
		{name: "node2", ip: "10.99.0.2", block: "10.244.2.0/26"},
	}
	var yaml strings.Builder
	yaml.WriteString("apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: v4}\nspec: {cidr: 10.244.0.0/16}\n")
	yaml.WriteString("---\napiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: v6}\nspec: {cidr: \"fd44::/48\"}\n")
	for i, n := range nodes {
		fmt.Fprintf(&yaml, "---\napiVersion: projectcalico.org/v3\nkind: Node\nmetadata: {name: %s}\nspec: {bgp: {ipv4Address: %s/24, ipv6Address: \"fd99::%d/64\"}}\n", n.name, n.ip, i+1)
		fmt.Fprintf(&yaml, "---\napiVersion: projectcalico.org/v3\nkind: BlockAffinity\nmetadata: {name: %s-v4}\nspec: {state: confirmed, node: %s, cidr: %s, deleted: false}\n", n.name, n.name, n.block)
		fmt.Fprintf(&yaml, "---\napiVersion: projectcalico.org/v3\nkind: BlockAffinity\nmetadata: {name: %s-v6}\nspec: {state: confirmed, node: %s, cidr: \"fd44:0:0:%d::/122\", deleted: false}\n", n.name, n.name, i+1)
	}
	seg := netnstest.New(t)
	birdtest.Bridge(t, seg)
	for i, n := range nodes {
		n.ns = netnstest.New(t)
		birdtest.Attach(t, seg, n.ns, fmt.Sprintf("s%d", i), n.ip+"/24")
		birdtest.MustInNS(t, n.ns, "ip", "-6", "addr", "add", fmt.Sprintf("fd99::%d/64", i+1), "dev", "eth0", "nodad")
	}
	logDir := t.TempDir()
	for _, n := range nodes {
		n.bird = birdtest.StartBIRD(t, n.ns, renderFor(t, n.name, yaml.String(), filepath.Join(logDir, n.name+".log")))
	}
	nodes[0].bird.WaitEstablished(t, 15*time.Second, "Mesh_10_99_0_2", "Mesh_fd99__2")
	nodes[1].bird.WaitEstablished(t, 15*time.Second, "Mesh_10_99_0_1", "Mesh_fd99__1")
	waitRoute(t, nodes[0], nodes[1].block, nodes[1].ip)
	for i, n := range nodes {
		other := 2 - i
		want := fmt.Sprintf("fd44:0:0:%d::/122 via fd99::%d dev eth0", other, other)
		deadline := time.Now().Add(10 * time.Second)
		for {
			out := birdtest.MustInNS(t, n.ns, "ip", "-6", "route", "show", "proto", "bird")
			if strings.Contains(out, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no IPv6 route %q; have:\n%s", n.name, want, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
