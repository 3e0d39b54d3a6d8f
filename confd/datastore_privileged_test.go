//go:build privileged && integration

package confd_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedDatastoreToBIRD runs the whole pipeline: resources in a real
// etcd -> WatchSyncer -> Daemon (debounced render) -> Driver -> a real BIRD
// per node, on three nodes: the mesh establishes, each node's block is
// learned by the others and pods talk across nodes. Creating a BGPPeer in
// etcd reaches node1's BIRD as a new protocol, without restarting the mesh
// sessions; the latency is logged.
func TestPrivilegedDatastoreToBIRD(t *testing.T) {
	nodes := []*testNode{
		{name: "node1", ip: "10.99.0.1", block: "10.244.1.0/26", pod: "10.244.1.2"},
		{name: "node2", ip: "10.99.0.2", block: "10.244.2.0/26", pod: "10.244.2.2"},
		{name: "node3", ip: "10.99.0.3", block: "10.244.3.0/26", pod: "10.244.3.2"},
	}
	yaml := resources(nodes, true, "")
	rs, err := v3.DecodeYAML([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	// Namespaces first, etcd second: testservers starts etcd with
	// Pdeathsig, which fires when the OS thread that forked it exits, and
	// creating a netns ends the (locked) thread it used. A netns created
	// after etcd can therefore kill etcd when the runtime reused that thread.
	cluster(t, nodes, yaml) // BIRDs start from the same rendered config
	server := testservers.StartEtcd(t)
	client, err := etcd.New(etcd.Config{Endpoints: []string{server.Endpoint()}, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	for _, r := range rs {
		if _, err := client.Create(ctx, r); err != nil {
			t.Fatalf("creating %s: %v", r.GetName(), err)
		}
	}

	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	logs := t.TempDir()
	for _, n := range nodes {
		drv, err := bird.NewDriver(n.bird.ConfigPath, n.bird.Ctl)
		if err != nil {
			t.Fatal(err)
		}
		d := confd.NewDaemon(confd.Config{NodeName: n.name, LogFile: filepath.Join(logs, n.name+".log"),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, drv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.RunWithSyncer(ctx, client)
		}()
	}
	before := nodes[0].bird.WaitEstablished(t, 15*time.Second, "Mesh_10_99_0_2", "Mesh_10_99_0_3")
	nodes[1].bird.WaitEstablished(t, 5*time.Second, "Mesh_10_99_0_1", "Mesh_10_99_0_3")
	nodes[2].bird.WaitEstablished(t, 5*time.Second, "Mesh_10_99_0_1", "Mesh_10_99_0_2")
	for _, from := range nodes {
		for _, to := range nodes {
			if from != to {
				waitRoute(t, to, from.block, from.ip)
			}
		}
	}

	peer, err := v3.DecodeYAML([]byte("apiVersion: projectcalico.org/v3\nkind: BGPPeer\nmetadata: {name: tor}\nspec: {node: node1, peerIP: 10.99.0.254, asNumber: 65000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := client.Create(ctx, peer[0]); err != nil {
		t.Fatal(err)
	}
	for {
		ps, err := nodes[0].bird.Protocols()
		if err == nil {
			if _, ok := ps["Node_10_99_0_254"]; ok {
				t.Logf("BGPPeer created in etcd -> running in BIRD after %v (watch + 20ms debounce + render + validate + configure)", time.Since(t0))
				for _, name := range []string{"Mesh_10_99_0_2", "Mesh_10_99_0_3"} {
					m := ps[name]
					if !strings.HasPrefix(m.Info, "Established") || m.Since != before[name].Since {
						t.Errorf("mesh session %s restarted: before %+v after %+v", name, before[name], m)
					}
				}
				break
			}
		}
		if time.Since(t0) > 10*time.Second {
			t.Fatalf("BGPPeer never reached BIRD: %v %v", ps, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	tcpBetweenPods(t, nodes[1], nodes[0])
	tcpBetweenPods(t, nodes[2], nodes[0])
	tcpBetweenPods(t, nodes[1], nodes[2])
}
