//go:build privileged

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// stallLimit bounds one plugin run in these tests: a run that has not
// finished by then is stuck (the plugin's own timeout is 30s).
const stallLimit = 45 * time.Second

// invocation is one plugin call as a runtime makes it.
type invocation struct {
	command string
	conf    string
	cid     string
	ifName  string
	netns   string
	args    string
}

// outcome is what the plugin answered: its CNI error code (0 on
// success), the message, and the result on stdout.
type outcome struct {
	code uint
	msg  string
	ips  []string
	out  []byte
}

// run execs the calico binary inside the node namespace and fails the
// test if it does not finish within stallLimit.
func (c *cluster) run(t *testing.T, in invocation) outcome {
	t.Helper()
	if in.ifName == "" {
		in.ifName = "eth0"
	}
	env := []string{
		"CNI_COMMAND=" + in.command, "CNI_CONTAINERID=" + in.cid, "CNI_IFNAME=" + in.ifName,
		"CNI_NETNS=" + in.netns, "CNI_PATH=" + cniBinDir(t), "CNI_ARGS=" + in.args,
		"TABBY_CNI_HINT_DIR=" + os.Getenv("TABBY_CNI_HINT_DIR"),
	}
	var out, errOut bytes.Buffer
	var runErr error
	c.inNode(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), stallLimit)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(cniBinDir(t), "calico"))
		cmd.Env = env
		cmd.Stdin = strings.NewReader(in.conf)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		runErr = cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("%s %s/%s did not finish within %s (stderr %q)", in.command, in.cid, in.ifName, stallLimit, errOut.String())
		}
		return nil
	})
	var res struct {
		Code    uint   `json:"code"`
		Msg     string `json:"msg"`
		Details string `json:"details"`
		IPs     []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	if out.Len() == 0 && runErr == nil {
		return outcome{}
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%s: plugin output is not JSON: %q (stderr %q, exit %v)", in.command, out.String(), errOut.String(), runErr)
	}
	o := outcome{code: res.Code, msg: res.Msg + ": " + res.Details, out: out.Bytes()}
	for _, ip := range res.IPs {
		o.ips = append(o.ips, ip.Address)
	}
	return o
}

func (c *cluster) mustRun(t *testing.T, in invocation) outcome {
	t.Helper()
	o := c.run(t, in)
	if o.code != 0 {
		t.Fatalf("%s %s/%s: code %d %s", in.command, in.cid, in.ifName, o.code, o.msg)
	}
	return o
}

// conf is a network configuration for this cluster's etcd; extra is
// spliced in before the closing brace.
func (c *cluster) conf(version, extra string) string {
	return `{"cniVersion":"` + version + `","name":"k8s-pod-network","type":"calico","nodename":"node1","etcd_endpoints":"` +
		c.etcd.UnixEndpoint() + `","ipam":{"type":"calico-ipam"}` + extra + `}`
}

func k8sArgs(namespace, pod string) string {
	return "K8S_POD_NAMESPACE=" + namespace + ";K8S_POD_NAME=" + pod
}

// nodeLink returns the node's link by name (nil when missing).
func (c *cluster) nodeLink(t *testing.T, name string) netlink.Link {
	t.Helper()
	var l netlink.Link
	c.inNode(func() error {
		l, _ = netlink.LinkByName(name)
		return nil
	})
	return l
}

// hostVeths lists the node's cali* links.
func (c *cluster) hostVeths(t *testing.T) []string {
	t.Helper()
	var names []string
	c.inNode(func() error {
		links, err := netlink.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if strings.HasPrefix(l.Attrs().Name, "cali") {
				names = append(names, l.Attrs().Name)
			}
		}
		return nil
	})
	return names
}

func (c *cluster) weps(t *testing.T) []*v3.WorkloadEndpoint {
	t.Helper()
	l, err := c.client.List(context.Background(), v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*v3.WorkloadEndpoint
	for _, o := range l.Items {
		out = append(out, o.(*v3.WorkloadEndpoint))
	}
	return out
}

// allocations counts the IPAM allocations per address.
func (c *cluster) allocations(t *testing.T) int {
	t.Helper()
	n := 0
	for _, l := range c.leftovers() {
		if strings.HasPrefix(l, "allocation ") {
			n++
		}
	}
	return n
}

func ipOnly(cidr string) string { return strings.SplitN(cidr, "/", 2)[0] }

// TestPrivilegedNodeNetnsRefused: CNI_NETNS naming the plugin's own
// namespace (the node's) is refused before any change, and a DEL with it
// and CNI_IFNAME of the node's uplink leaves the uplink and its default
// route alone (issue 19, item 3).
func TestPrivilegedNodeNetnsRefused(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.231.0.0/16"}})
	conf := c.conf("1.0.0", "")
	o := c.run(t, invocation{command: "ADD", conf: conf, cid: "cid-node-ns", netns: c.node.Path(), args: k8sArgs("default", "nodens")})
	if o.code != 8 || !strings.Contains(o.msg, "node's own network namespace") {
		t.Fatalf("ADD into the node's namespace: code %d %q, want 8 naming the node's namespace", o.code, o.msg)
	}
	if c.nodeLink(t, "eth0") != nil {
		t.Fatal("the node got an eth0")
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("the refused ADD left behind: %v", left)
	}
	// A pod that exists, then a DEL naming the node's namespace and uplink.
	p := c.newPod("nodens-victim")
	c.mustRun(t, invocation{command: "ADD", conf: conf, cid: "cid-node-ns", netns: p.netns.Path(), args: k8sArgs("default", "nodens")})
	for _, in := range []invocation{
		{command: "DEL", conf: conf, cid: "cid-node-ns", ifName: "uplink", netns: c.node.Path(), args: k8sArgs("default", "nodens")},
		{command: "DEL", conf: conf, cid: "cid-other", ifName: "uplink", netns: c.node.Path(), args: k8sArgs("default", "other")},
	} {
		// skel answers 8 after the plugin's DEL ran (its own check of
		// CNI_NETNS comes after the call); the DEL itself must not have
		// touched the node.
		if o := c.run(t, in); o.code != 0 && o.code != 8 {
			t.Fatalf("DEL: code %d %s", o.code, o.msg)
		}
		if c.nodeLink(t, "uplink") == nil {
			t.Fatalf("DEL %s with CNI_IFNAME=uplink deleted the node's uplink", in.cid)
		}
	}
	var routes []netlink.Route
	c.inNode(func() error {
		routes, _ = netlink.RouteList(nil, netlink.FAMILY_V4)
		return nil
	})
	hasDefault := false
	for _, r := range routes {
		if r.Dst == nil || r.Dst.String() == "0.0.0.0/0" {
			hasDefault = true
		}
	}
	if !hasDefault {
		t.Fatal("the node lost its default route")
	}
}

// TestPrivilegedGCCleansWholeAttachments: a GC whose valid attachments
// omit a pod removes that pod's endpoint, veth, route and address
// together, and the next ADD never shares an address with a live
// endpoint (issue 19, item 4).
func TestPrivilegedGCCleansWholeAttachments(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.232.0.0/16"}})
	conf := c.conf("1.1.0", "")
	a, b := c.newPod("gc-a"), c.newPod("gc-b")
	oa := c.mustRun(t, invocation{command: "ADD", conf: conf, cid: "cid-gc-a", netns: a.netns.Path(), args: k8sArgs("default", "gc-a")})
	c.mustRun(t, invocation{command: "ADD", conf: conf, cid: "cid-gc-b", netns: b.netns.Path(), args: k8sArgs("default", "gc-b")})
	gcConf := c.conf("1.1.0", `,"cni.dev/valid-attachments":[{"containerID":"cid-gc-b","ifname":"eth0"}]`)
	if o := c.run(t, invocation{command: "GC", conf: gcConf}); o.code != 0 {
		t.Fatalf("GC: code %d %s", o.code, o.msg)
	}
	for _, w := range c.weps(t) {
		if w.Spec.ContainerID == "cid-gc-a" {
			t.Fatalf("GC released gc-a's address but left its WorkloadEndpoint %s", w.Name)
		}
	}
	if n := len(c.hostVeths(t)); n != 1 {
		t.Fatalf("after GC the node has %d cali links (%v), want gc-b's only", n, c.hostVeths(t))
	}
	cpod := c.newPod("gc-c")
	oc := c.mustRun(t, invocation{command: "ADD", conf: conf, cid: "cid-gc-c", netns: cpod.netns.Path(), args: k8sArgs("default", "gc-c")})
	owners := map[string]string{}
	for _, w := range c.weps(t) {
		for _, n := range w.Spec.IPNetworks {
			if prev, dup := owners[n]; dup {
				t.Fatalf("address %s is on two endpoints: %s and %s", n, prev, w.Name)
			}
			owners[n] = w.Name
		}
	}
	t.Logf("gc-a had %v, gc-c got %v", oa.ips, oc.ips)

	// An attachment whose veth carries no owner mark (made before marks)
	// cannot be told to be unused: GC keeps all of it, address included.
	d := c.newPod("gc-d")
	c.mustRun(t, invocation{command: "ADD", conf: conf, cid: "cid-gc-d", netns: d.netns.Path(), args: k8sArgs("default", "gc-d")})
	var dVeth string
	for _, w := range c.weps(t) {
		if w.Spec.ContainerID == "cid-gc-d" {
			dVeth = w.Spec.InterfaceName
		}
	}
	c.inNode(func() error { return netlink.LinkSetAlias(c.nodeLink(t, dVeth), "") })
	before := c.allocations(t)
	gcConf = c.conf("1.1.0", `,"cni.dev/valid-attachments":[{"containerID":"cid-gc-b","ifname":"eth0"},{"containerID":"cid-gc-c","ifname":"eth0"}]`)
	if o := c.run(t, invocation{command: "GC", conf: gcConf}); o.code != 0 {
		t.Fatalf("GC: code %d %s", o.code, o.msg)
	}
	if c.nodeLink(t, dVeth) == nil || c.allocations(t) != before {
		t.Fatalf("GC took part of an attachment it cannot prove unused: veth %v, allocations %d -> %d", c.nodeLink(t, dVeth) != nil, before, c.allocations(t))
	}
	// The attachment GC kept is whole and works.
	if err := netnstest.Ping(c.node, ipOnly(c.weps(t)[0].Spec.IPNetworks[0]), 1, 5*time.Second); err != nil {
		t.Fatalf("node -> a pod after GC: %v", err)
	}
}

// TestPrivilegedDelAfterNodeRename: DEL with a different nodename finds
// the endpoint the ADD recorded and removes it with the address (issue
// 19, item 5).
func TestPrivilegedDelAfterNodeRename(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.233.0.0/16"}})
	p := c.newPod("renamed")
	in := invocation{command: "ADD", conf: c.conf("1.0.0", ""), cid: "cid-renamed", netns: p.netns.Path(), args: k8sArgs("default", "renamed")}
	c.mustRun(t, in)
	in.command = "DEL"
	in.conf = strings.Replace(in.conf, `"nodename":"node1"`, `"nodename":"node1-renamed"`, 1)
	c.mustRun(t, in)
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("DEL after the node was renamed left behind: %v", left)
	}
}

// TestPrivilegedRepeatedAdd: a second ADD for the same container and
// interface returns the same address and keeps the veth (issue 19,
// item 6).
func TestPrivilegedRepeatedAdd(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.234.0.0/16"}})
	p := c.newPod("twice")
	in := invocation{command: "ADD", conf: c.conf("1.0.0", ""), cid: "cid-twice", netns: p.netns.Path(), args: k8sArgs("default", "twice")}
	first := c.mustRun(t, in)
	veths := c.hostVeths(t)
	if len(veths) != 1 {
		t.Fatalf("cali links after one ADD: %v", veths)
	}
	index := c.nodeLink(t, veths[0]).Attrs().Index
	second := c.mustRun(t, in)
	if fmt.Sprint(first.ips) != fmt.Sprint(second.ips) {
		t.Fatalf("repeated ADD: first %v, then %v", first.ips, second.ips)
	}
	l := c.nodeLink(t, veths[0])
	if l == nil || l.Attrs().Index != index {
		t.Fatal("the repeated ADD recreated the veth")
	}
	if n := c.allocations(t); n != 1 {
		t.Fatalf("%d addresses allocated after a repeated ADD, want 1", n)
	}
	if err := netnstest.Ping(c.node, ipOnly(second.ips[0]), 1, 5*time.Second); err != nil {
		t.Fatalf("node -> pod after the repeated ADD: %v", err)
	}
	in.command = "DEL"
	c.mustRun(t, in)
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestPrivilegedRepeatedAddAfterCrash: an ADD whose process died after
// its IPAM writes, before its veth (here: the veth removed by hand), is
// repeated: the second ADD finds the first's mark (attempts.go), reads
// the handle and gets the same address. With the marks wiped, the second
// ADD adds an address to the handle rather than give one twice, and DEL
// releases both.
func TestPrivilegedRepeatedAddAfterCrash(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.236.0.0/16"}})
	p := c.newPod("crashed")
	in := invocation{command: "ADD", conf: c.conf("1.0.0", ""), cid: "cid-crashed", netns: p.netns.Path(), args: k8sArgs("default", "crashed")}
	removeVeth := func() {
		t.Helper()
		veths := c.hostVeths(t)
		if len(veths) != 1 {
			t.Fatalf("cali links: %v", veths)
		}
		l := c.nodeLink(t, veths[0])
		if err := c.inNode(func() error { return netlink.LinkDel(l) }); err != nil {
			t.Fatal(err)
		}
	}
	first := c.mustRun(t, in)
	removeVeth()
	second := c.mustRun(t, in)
	if fmt.Sprint(first.ips) != fmt.Sprint(second.ips) {
		t.Fatalf("ADD repeated after a crash: first %v, then %v", first.ips, second.ips)
	}
	if n := c.allocations(t); n != 1 {
		t.Fatalf("%d addresses allocated after the repeated ADD, want 1", n)
	}

	// Without its folder every ADD reads the handle: the same address.
	removeVeth()
	marks := filepath.Join(os.Getenv("TABBY_CNI_HINT_DIR"), "attempts")
	if err := os.RemoveAll(marks); err != nil {
		t.Fatal(err)
	}
	if again := c.mustRun(t, in); fmt.Sprint(again.ips) != fmt.Sprint(first.ips) || c.allocations(t) != 1 {
		t.Fatalf("ADD with no marks folder: %v (first %v), %d allocated", again.ips, first.ips, c.allocations(t))
	}
	// With the folder there but this mark gone, the handle is not read.
	removeVeth()
	entries, err := os.ReadDir(marks)
	if err != nil || len(entries) != 1 {
		t.Fatalf("marks after an ADD: %v %v, want one", entries, err)
	}
	if err := os.Remove(filepath.Join(marks, entries[0].Name())); err != nil {
		t.Fatal(err)
	}
	third := c.mustRun(t, in)
	if n := c.allocations(t); n != 2 || fmt.Sprint(third.ips) == fmt.Sprint(first.ips) {
		t.Fatalf("ADD with the marks wiped: %v (first %v), %d addresses allocated: want a second address under the handle", third.ips, first.ips, n)
	}
	in.command = "DEL"
	c.mustRun(t, in)
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestPrivilegedStaleDelKeepsLivePod: the DEL of an old sandbox of a pod
// whose WorkloadEndpoint is gone does not remove the new sandbox's veth
// (issue 19, item 7).
func TestPrivilegedStaleDelKeepsLivePod(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.235.0.0/16"}})
	conf := c.conf("1.0.0", "")
	old, live := c.newPod("sandbox-old"), c.newPod("sandbox-new")
	c.mustRun(t, invocation{command: "ADD", conf: conf, cid: "cid-sandbox-old", netns: old.netns.Path(), args: k8sArgs("default", "web")})
	o := c.mustRun(t, invocation{command: "ADD", conf: conf, cid: "cid-sandbox-new", netns: live.netns.Path(), args: k8sArgs("default", "web")})
	for _, w := range c.weps(t) {
		if _, err := c.client.Delete(context.Background(), datastore.KeyOf(w), datastore.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, netnsPath := range []string{old.netns.Path(), ""} {
		c.mustRun(t, invocation{command: "DEL", conf: conf, cid: "cid-sandbox-old", netns: netnsPath, args: k8sArgs("default", "web")})
		if len(c.hostVeths(t)) != 1 {
			t.Fatalf("the stale DEL (CNI_NETNS %q) removed the live pod's veth", netnsPath)
		}
		if err := netnstest.Ping(c.node, ipOnly(o.ips[0]), 1, 5*time.Second); err != nil {
			t.Fatalf("node -> live pod after the stale DEL: %v", err)
		}
	}
}

// TestPrivilegedSecondInterface: CNI_IFNAME=net1 for a container that has
// eth0 gets its own host veth and address, eth0 keeps working, and DEL
// net1 leaves eth0's address, veth and endpoint alone (issue 19, item 7).
func TestPrivilegedSecondInterface(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.236.0.0/16"}})
	conf := c.conf("1.0.0", "")
	p := c.newPod("multi")
	eth0 := invocation{command: "ADD", conf: conf, cid: "cid-multi", netns: p.netns.Path(), args: k8sArgs("default", "multi")}
	net1 := eth0
	net1.ifName = "net1"
	o0 := c.mustRun(t, eth0)
	o1 := c.mustRun(t, net1)
	if o0.ips[0] == o1.ips[0] {
		t.Fatalf("eth0 and net1 share %s", o0.ips[0])
	}
	if v := c.hostVeths(t); len(v) != 2 {
		t.Fatalf("host veths for eth0 and net1: %v, want two", v)
	}
	if err := netnstest.Ping(c.node, ipOnly(o0.ips[0]), 1, 5*time.Second); err != nil {
		t.Fatalf("node -> eth0 after adding net1: %v", err)
	}
	net1.command = "DEL"
	c.mustRun(t, net1)
	if v := c.hostVeths(t); len(v) != 1 {
		t.Fatalf("host veths after DEL net1: %v, want eth0's", v)
	}
	if n := c.allocations(t); n != 1 {
		t.Fatalf("%d allocations after DEL net1, want eth0's one", n)
	}
	if w := c.weps(t); len(w) != 1 || w[0].Spec.Endpoint != "eth0" {
		t.Fatalf("endpoints after DEL net1: %v", w)
	}
	if err := netnstest.Ping(c.node, ipOnly(o0.ips[0]), 2, 5*time.Second); err != nil {
		t.Fatalf("node -> eth0 after DEL net1: %v", err)
	}
	eth0.command = "DEL"
	c.mustRun(t, eth0)
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// hintPath is where the plugin keeps this cluster's block hints (see
// cni-plugin/plugin/blockhints.go).
func (c *cluster) hintPath() string {
	sum := sha256.Sum256([]byte("etcdv3\x00" + c.etcd.UnixEndpoint() + "\x00node1"))
	return filepath.Join(os.Getenv("TABBY_CNI_HINT_DIR"), "ipam-blocks-"+hex.EncodeToString(sum[:8]))
}

// TestPrivilegedSmallerBadInputs: each input of issue 19, item 8 gets a
// clear answer, never a stall, and leaves nothing behind.
func TestPrivilegedSmallerBadInputs(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.237.0.0/16"}})
	conf := c.conf("1.0.0", "")
	addDel := func(t *testing.T, conf, name string) {
		t.Helper()
		p := c.newPod(name)
		in := invocation{command: "ADD", conf: conf, cid: "cid-" + name, netns: p.netns.Path(), args: k8sArgs("default", name)}
		c.mustRun(t, in)
		in.command = "DEL"
		c.mustRun(t, in)
		if left := c.leftovers(); len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
	}

	t.Run("hint file is a FIFO", func(t *testing.T) {
		os.MkdirAll(filepath.Dir(c.hintPath()), 0o755)
		os.Remove(c.hintPath())
		if err := syscall.Mkfifo(c.hintPath(), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(c.hintPath())
		addDel(t, conf, "fifo")
	})
	t.Run("hint file links to /dev/zero", func(t *testing.T) {
		os.Remove(c.hintPath())
		if err := os.Symlink("/dev/zero", c.hintPath()); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(c.hintPath())
		addDel(t, conf, "devzero")
	})
	// The collector closing fd 0 under skel is reproduced exactly by
	// cmd/calico's TestReplaceStdinSurvivesGC; here a large stdin goes
	// the whole way through the binary.
	t.Run("stdin above 16 MB", func(t *testing.T) {
		pad := strings.Repeat("x", 20<<20)
		addDel(t, c.conf("1.0.0", `,"padding":"`+pad+`"`), "bigstdin")
	})
	for _, tc := range []struct{ name, namespace, pod, msg string }{
		{"pod name with a slash", "default", "a/b", "K8S_POD_NAME"},
		{"300-character pod name", "default", strings.Repeat("p", 300), "K8S_POD_NAME"},
		{"uppercase namespace", "Default", "upper", "K8S_POD_NAMESPACE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := c.newPod("badname")
			in := invocation{command: "ADD", conf: conf, cid: "cid-badname", netns: p.netns.Path(), args: k8sArgs(tc.namespace, tc.pod)}
			o := c.run(t, in)
			if o.code != 4 || !strings.Contains(o.msg, tc.msg) {
				t.Fatalf("ADD: code %d %q, want 4 naming %s", o.code, o.msg, tc.msg)
			}
			if left := c.leftovers(); len(left) > 0 {
				t.Fatalf("the refused ADD left behind: %v", left)
			}
			var links []netlink.Link
			p.netns.Do(func(ns.NetNS) error { links, _ = netlink.LinkList(); return nil })
			if len(links) != 1 { // lo
				t.Fatalf("the refused ADD touched the pod's namespace: %d links", len(links))
			}
			in.command = "DEL"
			c.mustRun(t, in)
		})
	}
	t.Run("DEL with a garbage prevResult", func(t *testing.T) {
		for i, garbage := range []string{`"garbage"`, `{"ips":"x","interfaces":7}`, `[1,2]`, `{"cniVersion":"1.0.0","ips":[{"address":"not-an-ip"}]}`} {
			name := fmt.Sprintf("garbage%d", i)
			p := c.newPod(name)
			in := invocation{command: "ADD", conf: conf, cid: "cid-" + name, netns: p.netns.Path(), args: k8sArgs("default", name)}
			c.mustRun(t, in)
			in.command = "DEL"
			in.conf = c.conf("1.0.0", `,"prevResult":`+garbage)
			if o := c.run(t, in); o.code != 0 {
				t.Fatalf("DEL with prevResult %s: code %d %s", garbage, o.code, o.msg)
			}
			if left := c.leftovers(); len(left) > 0 {
				t.Fatalf("DEL with prevResult %s left behind: %v", garbage, left)
			}
		}
	})
	t.Run("CHECK with no addresses in prevResult", func(t *testing.T) {
		p := c.newPod("checkempty")
		in := invocation{command: "ADD", conf: conf, cid: "cid-checkempty", netns: p.netns.Path(), args: k8sArgs("default", "checkempty")}
		o := c.mustRun(t, in)
		var prev map[string]any
		json.Unmarshal(o.out, &prev)
		prev["ips"] = []any{}
		pr, _ := json.Marshal(prev)
		in.command, in.conf = "CHECK", c.conf("1.0.0", `,"prevResult":`+string(pr))
		if o := c.run(t, in); o.code == 0 {
			t.Fatal("CHECK with prevResult.ips [] passed: it checked nothing")
		}
		in.command, in.conf = "DEL", conf
		c.mustRun(t, in)
	})
}
