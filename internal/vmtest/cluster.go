package vmtest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/internal/vmtest/guest"
)

// Options shape a Cluster.
type Options struct {
	// Nodes is the number of VMs [default 2].
	Nodes int
	// SubnetOf gives node i's underlay subnet (0 or 1) [default all 0].
	SubnetOf func(i int) int
	// MemMiB is each VM's memory [default 1024].
	MemMiB int
	// Backend is calico-node's CALICO_NETWORKING_BACKEND [default vxlan].
	Backend string
}

// Cluster is a datastore on the host, a segment and one VM per node.
type Cluster struct {
	t      testing.TB
	Prefix string
	Seg    *Segment
	Etcd   *testservers.Etcd
	Client datastore.Client
	Nodes  []*Node
	Share  string
	// EtcdEndpoint is the datastore as the VMs reach it (over the segment).
	EtcdEndpoint string
	// Booted is how long the VMs took from qemu's start to every agent
	// answering.
	Booted time.Duration
	// Backend is calico-node's CALICO_NETWORKING_BACKEND.
	Backend string
}

// Start builds the image (cached) and the guest binaries, starts etcd and
// the segment, boots the VMs and waits for their agents. Everything is
// removed when the test ends; a VM that does not come up fails the test
// with its console's end.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	netnstest.RequireRoot(t)
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.SubnetOf == nil {
		o.SubnetOf = func(int) int { return 0 }
	}
	if _, err := exec.LookPath(Qemu); err != nil {
		t.Fatalf("%s not found (apt-get install qemu-system-x86): %v", Qemu, err)
	}
	img, err := EnsureImage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o.Backend == "" {
		o.Backend = "vxlan"
	}
	c := &Cluster{t: t, Prefix: NewPrefix(), Share: t.TempDir(), Backend: o.Backend}
	if err := BuildGuestBinaries(filepath.Join(c.Share, "bin")); err != nil {
		t.Fatal(err)
	}
	c.Etcd, c.Client = multinode.StartEtcd(t, "vmtest", "k8s,etcd")
	subnets := 1
	for i := 0; i < o.Nodes; i++ {
		subnets = max(subnets, o.SubnetOf(i)+1)
	}
	if c.Seg, err = NewSegment(c.Prefix, subnets); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Seg.Remove(); err != nil {
			t.Errorf("removing the segment: %v", err)
		}
	})
	if err := c.Seg.Forward(":2379", strings.TrimPrefix(c.Etcd.UnixEndpoint(), "unix://")); err != nil {
		t.Fatal(err)
	}
	c.EtcdEndpoint = "http://" + RouterAddr(0).Addr().String() + ":2379"
	for i := 0; i < o.Nodes; i++ {
		s := o.SubnetOf(i)
		c.Nodes = append(c.Nodes, &Node{c: c, ID: i, Name: fmt.Sprintf("node%d", i), Subnet: s, Addr: NodeAddr(s, i)})
	}
	c.writeShare()
	c.boot(img, o.MemMiB)
	return c
}

// writeShare writes the guests' config and run script into the share.
func (c *Cluster) writeShare() {
	cfg := guest.Config{CNI: CNIConfList(c.EtcdEndpoint)}
	for _, n := range c.Nodes {
		cfg.Nodes = append(cfg.Nodes, GuestNode(n.ID, n.Name, n.Subnet))
	}
	if err := WriteShare(c.Share, cfg); err != nil {
		c.t.Fatal(err)
	}
}

// boot starts every VM and waits for all agents (3 min each, in parallel).
func (c *Cluster) boot(img Image, mem int) {
	t := c.t
	start := time.Now()
	for _, n := range c.Nodes {
		tap := fmt.Sprintf("tap%d", n.ID)
		if err := c.Seg.AddTap(tap, n.Subnet); err != nil {
			t.Fatal(err)
		}
		vm, err := Boot(VMConfig{Image: img, ID: n.ID, Segment: c.Seg, Tap: tap, MAC: NodeMAC(n.ID), Share: c.Share, MemMiB: mem})
		if err != nil {
			t.Fatal(err)
		}
		n.VM = vm
		n.Guest = NewGuest(c.Seg, n.Addr.Addr())
		t.Cleanup(func() { c.stop(n) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.VM.waitFor(ctx, time.Second, func() bool {
				_, err := n.Exec("true")
				return err == nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			n := c.Nodes[i]
			t.Fatalf("%s's agent did not come up: %v\nqemu: %s\nconsole:\n%s\nagent:\n%s", n.Name, err, n.VM.QemuLog(),
				Tail(n.VM.Console, 3000), Tail(filepath.Join(c.Share, fmt.Sprintf("out-%d.log", n.ID)), 3000))
		}
	}
	c.Booted = time.Since(start)
	t.Logf("vmtest %s: %d VMs up in %v", c.Prefix, len(c.Nodes), c.Booted.Round(time.Millisecond))
}

// stop asks the agent to quit (the guest then powers off), kills qemu if
// it is still there after a grace, and on a failed test logs the node's
// agent and calico-node output.
func (c *Cluster) stop(n *Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if n.quit() == nil {
		_ = n.VM.Wait(ctx)
	}
	n.VM.Kill()
	if c.t.Failed() {
		for _, f := range []string{"out-%d.log", "calico-node-%d.log"} {
			p := filepath.Join(c.Share, fmt.Sprintf(f, n.ID))
			c.t.Logf("%s %s:\n%s", n.Name, filepath.Base(p), Tail(p, 4000))
		}
	}
}

// Create writes r to the datastore or fails the test.
func (c *Cluster) Create(r v3.Resource) v3.Resource {
	c.t.Helper()
	return multinode.Create(c.t, c.Client, r)
}

// Node is one VM.
type Node struct {
	c      *Cluster
	ID     int
	Name   string
	Subnet int
	Addr   netip.Prefix // the underlay address
	VM     *VM
	Guest  *Guest
}

// Log is the output of a process the node's agent spawned (name as given
// to Spawn), read from the share.
func (n *Node) Log(name string) string {
	b, err := os.ReadFile(filepath.Join(n.c.Share, fmt.Sprintf("%s-%d.log", name, n.ID)))
	if err != nil {
		return err.Error()
	}
	return string(b)
}
