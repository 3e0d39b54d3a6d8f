//go:build integration

package commands

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// allocateIn allocates one address for handle on node from pool.
func (w *world) allocateIn(node, handle, pool string, attrs map[string]string) netip.Addr {
	w.t.Helper()
	ips, err := ipam.New(w.c, ipam.Config{}).AutoAssign(w.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Attrs: attrs, Hostname: node, IPv4Pools: []string{pool}})
	if err != nil || len(ips) != 1 {
		w.t.Fatalf("allocating for %s on %s from %s: %v %v", handle, node, pool, ips, err)
	}
	return ips[0]
}

// list returns the items of kind.
func (w *world) list(kind string) []v3.Resource {
	w.t.Helper()
	l, err := w.c.List(w.ctx, kind, datastore.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return l.Items
}

// leftovers names everything of node still in the datastore: its record,
// endpoints, addresses, handles, block affinities and blocks, BGP peers,
// per-node configurations and host endpoints.
func (w *world) leftovers(node string, handles ...string) []string {
	w.t.Helper()
	var out []string
	if _, err := w.c.Get(w.ctx, datastore.Key{Kind: v3.KindNode, Name: node}); !errors.Is(err, datastore.ErrNotFound) {
		out = append(out, "the Node")
	}
	for _, r := range w.list(v3.KindWorkloadEndpoint) {
		if r.(*v3.WorkloadEndpoint).Spec.Node == node {
			out = append(out, "endpoint "+r.GetName())
		}
	}
	for _, r := range w.list(v3.KindBlockAffinity) {
		if r.(*v3.BlockAffinity).Spec.Node == node {
			out = append(out, "affinity "+r.GetName())
		}
	}
	for _, r := range w.list(v3.KindIPAMBlock) {
		if a := r.(*v3.IPAMBlock).Spec.Affinity; a != nil && *a == ipam.AffinityValue(node) {
			out = append(out, "block "+r.GetName())
		}
	}
	for _, r := range w.list(v3.KindIPAMHandle) {
		for _, h := range handles {
			if r.(*v3.IPAMHandle).Spec.HandleID == h {
				out = append(out, "handle "+h)
			}
		}
	}
	als, err := ipam.New(w.c, ipam.Config{}).ListAllocations(w.ctx, func(a ipam.Allocated) bool { return a.Attrs[ipam.AttrNode] == node })
	if err != nil {
		w.t.Fatal(err)
	}
	for _, a := range als {
		out = append(out, "address "+a.IP.String())
	}
	for _, r := range w.list(v3.KindBGPPeer) {
		if r.(*v3.BGPPeer).Spec.Node == node {
			out = append(out, "BGP peer "+r.GetName())
		}
	}
	for _, r := range w.list(v3.KindHostEndpoint) {
		if r.(*v3.HostEndpoint).Spec.Node == node {
			out = append(out, "host endpoint "+r.GetName())
		}
	}
	for _, kind := range []string{v3.KindFelixConfiguration, v3.KindBGPConfiguration} {
		if _, err := w.c.Get(w.ctx, datastore.Key{Kind: kind, Name: "node." + node}); !errors.Is(err, datastore.ErrNotFound) {
			out = append(out, kind+" node."+node)
		}
	}
	return out
}

const perNodeYAML = `apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: peer-gone}
spec: {node: n-gone, peerIP: 192.0.2.1, asNumber: 64512}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: peer-keep}
spec: {node: n-keep, peerIP: 192.0.2.2, asNumber: 64512}
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: node.n-gone}
spec: {logSeverityScreen: Debug}
---
apiVersion: projectcalico.org/v3
kind: FelixConfiguration
metadata: {name: node.n-keep}
spec: {logSeverityScreen: Debug}
---
apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: node.n-gone}
spec: {logSeverityScreen: Debug}
---
apiVersion: projectcalico.org/v3
kind: HostEndpoint
metadata: {name: hep-gone}
spec: {node: n-gone, interfaceName: eth0}
`

// testDeleteCascade: calicoctl delete node leaves nothing of the node
// (endpoints, addresses, handles, affinities, blocks, peers, per-node
// configurations, host endpoints) and ipam check is clean; calicoctl
// delete ippool leaves none of the pool's empty blocks and no affinity in
// it (confd and felix route a node's blocks from its affinities), and the
// block still in use shows as outside every pool. On the Kubernetes
// datastore the node's life is Kubernetes': the Kubernetes Node and its
// pods are deleted first (as Kubernetes does), then calicoctl delete node
// cleans up after it.
func testDeleteCascade(t *testing.T, b cliBackend) {
	w := newWorld(t, b)
	var tr strings.Builder
	run := func(wantCode int, stdin, cmd string) {
		t.Helper()
		out, code := b.run(t, stdin, strings.Fields(cmd)...)
		if code != wantCode {
			t.Errorf("calicoctl %s: exit %d, want %d\n%s", cmd, code, wantCode, out)
		}
		tr.WriteString(out + "\n")
	}
	run(0, `apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: cas-a}
spec: {cidr: 10.90.0.0/24, blockSize: 29}
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: cas-b}
spec: {cidr: 10.91.0.0/24, blockSize: 29}
`, "apply -f -")
	w.addNode("n-gone")
	w.addNode("n-keep")
	w.addNode("n-other")
	tunnel := w.allocateIn("n-gone", "vxlan-tunnel-addr-n-gone", "cas-a", map[string]string{ipam.AttrNode: "n-gone", ipam.AttrType: "vxlanTunnelAddress"})
	r, err := w.c.Get(w.ctx, datastore.Key{Kind: v3.KindNode, Name: "n-gone"})
	if err != nil {
		t.Fatal(err)
	}
	n := r.(*v3.Node)
	n.Spec.IPv4VXLANTunnelAddr = tunnel.String()
	if _, err := w.c.Update(w.ctx, n); err != nil {
		t.Fatal(err)
	}
	gone := []string{"k8s-pod-network.p1", "k8s-pod-network.p2", "k8s-pod-network.ghost", "vxlan-tunnel-addr-n-gone"}
	w.addPod("n-gone", "p1", w.allocateIn("n-gone", gone[0], "cas-a", podAttrs("n-gone", "p1")))
	w.addPod("n-gone", "p2", w.allocateIn("n-gone", gone[1], "cas-b", podAttrs("n-gone", "p2")))
	w.allocateIn("n-gone", gone[2], "cas-a", podAttrs("n-gone", "ghost")) // its pod is gone: a leak of the node
	w.addPod("n-keep", "k1", w.allocateIn("n-keep", "k8s-pod-network.k1", "cas-a", podAttrs("n-keep", "k1")))
	k2 := w.allocateIn("n-keep", "k8s-pod-network.k2", "cas-b", podAttrs("n-keep", "k2"))
	w.addPod("n-keep", "k2", k2)
	run(0, perNodeYAML, "apply -f -")
	run(0, "", "ipam show --show-blocks")

	// Deleting the node.
	if w.kube != nil {
		w.deletePod("n-gone", "p1")
		w.deletePod("n-gone", "p2")
		w.deleteNode("n-gone")
		run(1, "", "delete node n-gone")
		run(0, "", "delete node n-gone --skip-not-exists")
	} else {
		run(0, "", "delete node n-gone")
		run(1, "", "delete node n-gone")
	}
	if left := w.leftovers("n-gone", gone...); len(left) > 0 {
		t.Errorf("left of node n-gone after calicoctl delete node: %v", left)
	}
	// The other node keeps all of its own.
	kept := strings.Join(w.leftovers("n-keep", "k8s-pod-network.k1", "k8s-pod-network.k2"), ",")
	for _, want := range []string{"the Node", "handle k8s-pod-network.k1", "handle k8s-pod-network.k2", "BGP peer peer-keep", "FelixConfiguration node.n-keep",
		"address " + k2.String()} {
		if !strings.Contains(kept, want) {
			t.Errorf("n-keep lost %s (has %s)", want, kept)
		}
	}
	run(0, "", "ipam check --grace=0s")
	run(0, "", "get bgppeers")
	run(0, "", "get felixconfigurations")
	run(0, "", "get hostendpoints")

	// Deleting a pool: n-other's block of it is emptied first.
	w.allocateIn("n-other", "k8s-pod-network.tmp", "cas-b", podAttrs("n-other", "tmp"))
	if _, err := ipam.New(w.c, ipam.Config{}).ReleaseByHandle(w.ctx, "k8s-pod-network.tmp"); err != nil {
		t.Fatal(err)
	}
	run(0, "", "ipam show --show-blocks")
	run(0, "", "delete ippool cas-b")
	pool := netip.MustParsePrefix("10.91.0.0/24")
	for _, r := range w.list(v3.KindBlockAffinity) {
		if p := netip.MustParsePrefix(r.(*v3.BlockAffinity).Spec.CIDR); pool.Contains(p.Addr()) {
			t.Errorf("affinity %s of the deleted pool remains: a node would still route it", r.GetName())
		}
	}
	var inPool []string
	for _, r := range w.list(v3.KindIPAMBlock) {
		bl := r.(*v3.IPAMBlock)
		p := netip.MustParsePrefix(bl.Spec.CIDR)
		if !pool.Contains(p.Addr()) {
			continue
		}
		inPool = append(inPool, p.String())
		if ipam.IsEmpty(bl) || bl.Spec.Affinity != nil || !p.Contains(k2) {
			t.Errorf("block %s of the deleted pool: empty %v, affinity %v; only k2's block (un-affined) should remain", p, ipam.IsEmpty(bl), bl.Spec.Affinity)
		}
	}
	if len(inPool) != 1 {
		t.Errorf("blocks of the deleted pool left: %v, want only k2's", inPool)
	}
	run(0, "", "ipam show --show-blocks")
	run(0, "", "ipam check --grace=0s")
	run(0, "", "get ippools")
	checkGolden(t, "delete-cascade-"+b.kind(), tr.String())

	// Leave the datastore as found for the scenarios after this one: the
	// other nodes go the same way, then the emptied block of the deleted
	// pool (a leftover the garbage collector would take).
	w.deletePod("n-keep", "k1")
	w.deletePod("n-keep", "k2")
	w.deleteNode("n-keep")
	w.deleteNode("n-other")
	for _, cmd := range []string{"delete node n-keep n-other --skip-not-exists", "delete ippool cas-a"} {
		if out, code := b.run(t, "", strings.Fields(cmd)...); code != 0 {
			t.Fatalf("cleaning up: %s", out)
		}
	}
	for _, r := range w.list(v3.KindIPAMBlock) {
		if !pool.Contains(netip.MustParsePrefix(r.(*v3.IPAMBlock).Spec.CIDR).Addr()) {
			continue
		}
		if _, err := w.c.Delete(w.ctx, datastore.KeyOf(r), datastore.DeleteOptions{ResourceVersion: r.GetResourceVersion()}); err != nil {
			t.Fatal(err)
		}
	}
	if als, _ := ipam.New(w.c, ipam.Config{}).ListAllocations(w.ctx, nil); len(als) > 0 || len(w.list(v3.KindBlockAffinity))+len(w.list(v3.KindIPAMHandle)) > 0 {
		t.Fatalf("IPAM state left after cleaning up: %v", als)
	}
}
