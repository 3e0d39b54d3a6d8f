//go:build integration

package kubecontrollers_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// forceDelete deletes a pod at once, as the pod GC does for pods of
// deleted nodes and `kubectl delete --force` for pods of nodes that are
// down (no kubelet confirms the graceful deletion).
var forceDelete = metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}

// TestIntegrationNodeDeletedReleasesIPAM: on both datastores, a deleted
// Kubernetes Node's block affinities, blocks, tunnel address and pod
// addresses are released (at once, the leak grace period is for live
// nodes), its Calico Node, endpoints, BGP peer and per-node configurations
// are gone (etcd: the shared lifecycle path of calicoctl delete node), and
// another node's are untouched.
func TestIntegrationNodeDeletedReleasesIPAM(t *testing.T) {
	for _, mode := range []string{"kubernetes", "etcd"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, mode == "etcd")
			ctx := ctxT(t)
			c.configure(t, time.Hour, 200*time.Millisecond)
			c.createPool(t, "10.70.0.0/16")
			c.createNode(t, "node-a")
			c.createNode(t, "node-b")
			gone := c.addPod(t, "default", "pod-a", "node-a", nil)
			live := c.addPod(t, "default", "pod-b", "node-b", nil)
			tunnel, err := ipam.New(c.ds, ipam.Config{}).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1,
				HandleID: "ipip-tunnel-addr-node-a", Hostname: "node-a", Use: v3.IPPoolAllowedUseTunnel,
				Attrs: map[string]string{ipam.AttrNode: "node-a", ipam.AttrType: "ipipTunnelAddress"}})
			if err != nil {
				t.Fatal(err)
			}
			if a := c.affinities(t); a["node-a"] == 0 || a["node-b"] == 0 {
				t.Fatalf("affinities before: %v", a)
			}
			perNode := perNodeResources("node-a", "node-b")
			for _, r := range perNode {
				if _, err := c.ds.Create(ctx, r); err != nil {
					t.Fatal(err)
				}
			}

			in := c.start(t, runOpts{identity: "only"})
			in.pass(t)
			if !c.allocated(t, gone) || !c.allocated(t, tunnel[0]) {
				t.Fatal("a live node's addresses were released")
			}

			// The node goes, and its pod with it (the pod GC would delete
			// it; the CNI DEL never runs).
			if err := c.kube.CoreV1().Pods("default").Delete(ctx, "pod-a", forceDelete); err != nil {
				t.Fatal(err)
			}
			if err := c.kube.CoreV1().Nodes().Delete(ctx, "node-a", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "node-a's affinities, blocks and addresses released", func() (bool, error) {
				return c.affinities(t)["node-a"] == 0 && c.blocksOf(t, "node-a") == 0 &&
					!c.allocated(t, gone) && !c.allocated(t, tunnel[0]), nil
			})
			if c.etcd {
				eventually(t, "node-a's Calico Node and endpoints deleted", func() (bool, error) {
					_, err := c.ds.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: "node-a"})
					l, lerr := c.ds.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
					if lerr != nil {
						return false, lerr
					}
					for _, r := range l.Items {
						if r.(*v3.WorkloadEndpoint).Spec.Node == "node-a" {
							return false, nil
						}
					}
					return err != nil, nil
				})
			}
			// etcd mode: the shared node deletion (lifecycle.Deleter.
			// DeleteNode, as calicoctl delete node) took its peer and
			// per-node configurations too; node-b's stay. Kubernetes mode,
			// as Calico's: only IPAM is cleaned up.
			eventually(t, "node-a's BGP peer and node.node-a configurations deleted in etcd mode only", func() (bool, error) {
				for _, r := range perNode {
					_, err := c.ds.Get(ctx, datastore.KeyOf(r))
					if gone := err != nil; gone != (c.etcd && strings.Contains(r.GetName(), "node-a")) {
						return false, nil
					}
				}
				return true, nil
			})
			if h, err := c.ds.List(ctx, v3.KindIPAMHandle, datastore.ListOptions{}); err != nil || len(h.Items) != 1 {
				t.Fatalf("handles left: %v %v (want only pod-b's)", h, err)
			}
			in.pass(t)
			if !c.allocated(t, live) || c.affinities(t)["node-b"] == 0 || c.blocksOf(t, "node-b") == 0 {
				t.Fatalf("node-b's state was touched: allocated %v affinities %v", c.allocated(t, live), c.affinities(t))
			}
			if c.etcd {
				if _, err := c.ds.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: "node-b"}); err != nil {
					t.Fatalf("node-b's Calico Node: %v", err)
				}
			}
		})
	}
}

// perNodeResources are a BGPPeer and node.<name> FelixConfiguration and
// BGPConfiguration for each node.
func perNodeResources(nodes ...string) []v3.Resource {
	var out []v3.Resource
	for _, n := range nodes {
		out = append(out,
			&v3.BGPPeer{TypeMeta: metav1.TypeMeta{Kind: v3.KindBGPPeer, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: "peer-" + n},
				Spec: v3.BGPPeerSpec{Node: n, PeerIP: "192.0.2.1", ASNumber: 64512}},
			&v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: "node." + n}},
			&v3.BGPConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindBGPConfiguration, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: "node." + n}})
	}
	return out
}

// TestIntegrationLeakedAddressReclaimedAfterGrace: a pod deleted while its
// node was down (no CNI DEL) keeps its address for the leak grace period
// and loses it after; a live pod's address is never taken, however long
// the controller runs.
func TestIntegrationLeakedAddressReclaimedAfterGrace(t *testing.T) {
	for _, mode := range []string{"kubernetes", "etcd"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, mode == "etcd")
			ctx := ctxT(t)
			const grace = 15 * time.Minute
			c.configure(t, grace, 200*time.Millisecond)
			c.createPool(t, "10.71.0.0/16")
			c.createNode(t, "node-a")
			leaked := c.addPod(t, "default", "deleted", "node-a", nil)
			live := c.addPod(t, "default", "live", "node-a", nil)

			clk := &clock{t: time.Now()}
			in := c.start(t, runOpts{identity: "only", now: clk.Now})
			in.pass(t)
			if err := c.kube.CoreV1().Pods("default").Delete(ctx, "deleted", forceDelete); err != nil {
				t.Fatal(err)
			}
			// Seen as a candidate, then kept for (almost) the whole grace.
			r := in.pass(t)
			if r.Candidates == 0 {
				t.Fatalf("pass after the deletion: no candidate (%+v)", r)
			}
			clk.Advance(grace - time.Second)
			in.pass(t)
			if !c.allocated(t, leaked) {
				t.Fatal("address reclaimed before the grace period")
			}
			clk.Advance(2 * time.Second)
			eventually(t, "the deleted pod's address reclaimed after the grace period", func() (bool, error) {
				return !c.allocated(t, leaked), nil
			})
			for range 3 {
				clk.Advance(24 * time.Hour)
				in.pass(t)
			}
			if !c.allocated(t, live) {
				t.Fatal("the live pod's address was reclaimed")
			}
			if c.affinities(t)["node-a"] == 0 {
				t.Fatal("the live node lost its affinity")
			}
		})
	}
}

// TestIntegrationOneReplicaActs: two replicas, never both leading; the
// leader stopped, the other takes over and does the work.
func TestIntegrationOneReplicaActs(t *testing.T) {
	c := newCluster(t, false)
	ctx := ctxT(t)
	c.configure(t, time.Hour, 200*time.Millisecond)
	c.createPool(t, "10.72.0.0/16")
	c.createNode(t, "node-a")
	c.createNode(t, "node-b")
	c.addPod(t, "default", "pod-a", "node-a", nil)
	c.addPod(t, "default", "pod-b", "node-b", nil)

	var leaders, maxLeaders atomic.Int32
	onLead := func(b bool) {
		if !b {
			leaders.Add(-1)
			return
		}
		n := leaders.Add(1)
		for {
			m := maxLeaders.Load()
			if n <= m || maxLeaders.CompareAndSwap(m, n) {
				break
			}
		}
	}
	a := c.start(t, runOpts{identity: "a", onLead: onLead})
	b := c.start(t, runOpts{identity: "b", onLead: onLead})
	var first, second *instance
	select {
	case <-a.leading:
		first, second = a, b
	case <-b.leading:
		first, second = b, a
	case <-time.After(time.Minute):
		t.Fatal("nobody leads")
	}
	first.pass(t)
	select {
	case r := <-second.passes:
		t.Fatalf("the replica that does not lead ran a GC pass: %+v", r)
	default:
	}

	first.stop()
	select {
	case <-second.leading:
	case <-time.After(time.Minute):
		t.Fatal("the second replica never took over")
	}
	// The new leader works: a node deleted now is cleaned up.
	if err := c.kube.CoreV1().Pods("default").Delete(ctx, "pod-a", forceDelete); err != nil {
		t.Fatal(err)
	}
	if err := c.kube.CoreV1().Nodes().Delete(ctx, "node-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-a's affinities released by the new leader", func() (bool, error) {
		return c.affinities(t)["node-a"] == 0, nil
	})
	if m := maxLeaders.Load(); m != 1 {
		t.Fatalf("%d replicas led at once", m)
	}
}
