package lifecycle

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

func meta(kind, name string) (metav1.TypeMeta, metav1.ObjectMeta) {
	return metav1.TypeMeta{Kind: kind, APIVersion: v3.GroupVersion}, metav1.ObjectMeta{Name: name}
}

func pool(name, cidr string) *v3.IPPool {
	tm, om := meta(v3.KindIPPool, name)
	return &v3.IPPool{TypeMeta: tm, ObjectMeta: om, Spec: v3.IPPoolSpec{CIDR: cidr, BlockSize: 28}}
}

func node(name, tunnel string) *v3.Node {
	tm, om := meta(v3.KindNode, name)
	n := &v3.Node{TypeMeta: tm, ObjectMeta: om}
	if tunnel != "" {
		n.Spec.IPv4VXLANTunnelAddr = tunnel
	}
	return n
}

func wep(node, pod string, ips ...netip.Addr) *v3.WorkloadEndpoint {
	tm, om := meta(v3.KindWorkloadEndpoint, strings.ReplaceAll(node, "-", "--")+"-k8s-"+pod+"-eth0")
	om.Namespace = "default"
	w := &v3.WorkloadEndpoint{TypeMeta: tm, ObjectMeta: om,
		Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: pod, Endpoint: "eth0", InterfaceName: "cali" + pod}}
	for _, ip := range ips {
		w.Spec.IPNetworks = append(w.Spec.IPNetworks, netip.PrefixFrom(ip, 32).String())
	}
	return w
}

func peer(name, node string) *v3.BGPPeer {
	tm, om := meta(v3.KindBGPPeer, name)
	return &v3.BGPPeer{TypeMeta: tm, ObjectMeta: om, Spec: v3.BGPPeerSpec{Node: node, PeerIP: "192.0.2.1", ASNumber: 64512}}
}

func hep(name, node string) *v3.HostEndpoint {
	tm, om := meta(v3.KindHostEndpoint, name)
	return &v3.HostEndpoint{TypeMeta: tm, ObjectMeta: om, Spec: v3.HostEndpointSpec{Node: node, InterfaceName: "eth0"}}
}

func felixConfig(name string) *v3.FelixConfiguration {
	tm, om := meta(v3.KindFelixConfiguration, name)
	return &v3.FelixConfiguration{TypeMeta: tm, ObjectMeta: om}
}

func bgpConfig(name string) *v3.BGPConfiguration {
	tm, om := meta(v3.KindBGPConfiguration, name)
	return &v3.BGPConfiguration{TypeMeta: tm, ObjectMeta: om}
}

func mustCreate(t *testing.T, c datastore.Client, rs ...v3.Resource) {
	t.Helper()
	for _, r := range rs {
		if _, err := c.Create(context.Background(), r); err != nil {
			t.Fatalf("creating %s: %v", datastore.KeyOf(r), err)
		}
	}
}

func assign(t *testing.T, al *ipam.Allocator, node, handle string, pools ...string) netip.Addr {
	t.Helper()
	ips, err := al.AutoAssign(context.Background(), ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Hostname: node,
		Attrs: map[string]string{ipam.AttrNode: node}, IPv4Pools: pools})
	if err != nil {
		t.Fatal(err)
	}
	return ips[0]
}

// names lists the keys of a kind in the store.
func names(t *testing.T, c datastore.Client, kind string) []string {
	t.Helper()
	l, err := c.List(context.Background(), kind, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range l.Items {
		out = append(out, r.GetName())
	}
	return out
}

// TestDeleteNodeLeavesNothing: after DeleteNode, nothing of the node is
// left (endpoints, addresses, handles, affinities, blocks, peers, per-node
// configurations, host endpoints) and the other node (whose name the
// deleted one's is a prefix of) is untouched; the IPAM leak check is
// clean.
func TestDeleteNodeLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	al := ipam.New(s, ipam.Config{})
	mustCreate(t, s, pool("p", "10.0.0.0/24"))
	tunnel := assign(t, al, "n1", "vxlan-tunnel-addr-n1")
	mustCreate(t, s, node("n1", tunnel.String()), node("n1-b", ""))
	a := assign(t, al, "n1", "k8s-pod-network.a")
	b := assign(t, al, "n1", "k8s-pod-network.b")
	keep := assign(t, al, "n1-b", "k8s-pod-network.keep")
	assign(t, al, "n1", "k8s-pod-network.ghost") // its endpoint is gone already
	mustCreate(t, s, wep("n1", "a", a), wep("n1", "b", b), wep("n1-b", "keep", keep),
		peer("n1-peer", "n1"), peer("n1-b-peer", "n1-b"), peer("global", ""),
		hep("n1-eth0", "n1"), hep("n1-b-eth0", "n1-b"),
		felixConfig("node.n1"), felixConfig("node.n1-b"), felixConfig("default"), bgpConfig("node.n1"))

	d := Deleter{Client: s, Settle: -1}
	if _, err := d.Delete(ctx, datastore.Key{Kind: v3.KindNode, Name: "n1"}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		v3.KindNode:               {"n1-b"},
		v3.KindWorkloadEndpoint:   {"n1--b-k8s-keep-eth0"},
		v3.KindBGPPeer:            {"global", "n1-b-peer"},
		v3.KindHostEndpoint:       {"n1-b-eth0"},
		v3.KindFelixConfiguration: {"default", "node.n1-b"},
		v3.KindBGPConfiguration:   nil,
		v3.KindIPAMHandle:         {"k8s-pod-network.keep"},
		v3.KindBlockAffinity:      {ipam.AffinityName("n1-b", ipam.BlockFor(keep, 28))},
		v3.KindIPAMBlock:          {ipam.BlockName(ipam.BlockFor(keep, 28))},
	}
	for kind, w := range want {
		if d := cmp.Diff(w, names(t, s, kind)); d != "" {
			t.Errorf("%s after deleting n1 (-want +got):\n%s", kind, d)
		}
	}
	rep, err := al.CheckLeaks(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Leaks)+len(rep.DeadNodes)+len(rep.EmptyUnaffineBlocks)+len(rep.OrphanHandles)+len(rep.StaleAffinities) != 0 {
		t.Errorf("IPAM check after deleting n1: %+v", rep)
	}

	// Deleting it again cleans up whatever is left (nothing) and says it
	// is gone.
	if _, err := d.Delete(ctx, datastore.Key{Kind: v3.KindNode, Name: "n1"}, datastore.DeleteOptions{}); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("second delete: %v, want not found", err)
	}
}

// TestDeleteNodeKeepsBlockWithOthersAddresses: a block of the node that
// another node's pod borrowed from loses its affinity but keeps that
// address; an address of the node outside every pool is skipped.
func TestDeleteNodeKeepsBlockWithOthersAddresses(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	al := ipam.New(s, ipam.Config{})
	// n1's tunnel address is in no pool (set by hand): nothing to release.
	mustCreate(t, s, pool("p", "10.0.0.0/28"), node("n1", "192.0.2.9"), node("n2", ""))
	a := assign(t, al, "n1", "k8s-pod-network.a")
	// The pool is one block: n2 borrows from n1's.
	b := assign(t, al, "n2", "k8s-pod-network.b")
	mustCreate(t, s, wep("n1", "a", a), wep("n2", "b", b))
	if _, err := (Deleter{Client: s, Settle: -1}).DeleteNode(ctx, "n1", datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	allocs, err := al.ListAllocations(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 1 || allocs[0].IP != b {
		t.Fatalf("allocations after deleting n1: %+v, want only n2's %s", allocs, b)
	}
	r, err := s.Get(ctx, datastore.Key{Kind: v3.KindIPAMBlock, Name: "10-0-0-0-28"})
	if err != nil {
		t.Fatal(err)
	}
	if aff := r.(*v3.IPAMBlock).Spec.Affinity; aff != nil {
		t.Fatalf("block still affine to %s", *aff)
	}
	if got := names(t, s, v3.KindBlockAffinity); len(got) != 0 {
		t.Fatalf("affinities left: %v", got)
	}
}

// TestDeletePool: the pool is disabled, its empty blocks deleted, its
// blocks in use un-affined and kept; another pool's blocks are untouched.
func TestDeletePool(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	al := ipam.New(s, ipam.Config{})
	mustCreate(t, s, pool("gone", "10.0.0.0/24"), node("n1", ""), node("n2", ""))
	used := assign(t, al, "n1", "k8s-pod-network.used")
	freed := assign(t, al, "n2", "k8s-pod-network.freed")
	if _, err := al.ReleaseByHandle(ctx, "k8s-pod-network.freed"); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, pool("other", "10.1.0.0/24"))
	other := assign(t, al, "n2", "k8s-pod-network.other", "other")
	_ = freed

	if _, err := (Deleter{Client: s, Settle: -1}).Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "gone"}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, s, v3.KindIPPool); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("pools %v", got)
	}
	usedBlock, otherBlock := ipam.BlockFor(used, 28), ipam.BlockFor(other, 28)
	if d := cmp.Diff([]string{ipam.BlockName(usedBlock), ipam.BlockName(otherBlock)}, names(t, s, v3.KindIPAMBlock)); d != "" {
		t.Errorf("blocks (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{ipam.AffinityName("n2", otherBlock)}, names(t, s, v3.KindBlockAffinity)); d != "" {
		t.Errorf("affinities (-want +got):\n%s", d)
	}
	r, err := s.Get(ctx, datastore.Key{Kind: v3.KindIPAMBlock, Name: ipam.BlockName(usedBlock)})
	if err != nil {
		t.Fatal(err)
	}
	if b := r.(*v3.IPAMBlock); b.Spec.Affinity != nil || ipam.IsEmpty(b) {
		t.Errorf("the block in use should stay, un-affined: affinity %v, empty %v", b.Spec.Affinity, ipam.IsEmpty(b))
	}
	allocs, err := al.ListAllocations(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ips []netip.Addr
	for _, x := range allocs {
		ips = append(ips, x.IP)
	}
	if d := cmp.Diff([]netip.Addr{used, other}, ips, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("allocations (-want +got):\n%s", d)
	}
}

// TestDeletePoolDisablesWithPrecondition: a stale resourceVersion fails
// the delete before anything is released.
func TestDeletePoolDisablesWithPrecondition(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	al := ipam.New(s, ipam.Config{})
	mustCreate(t, s, pool("p", "10.0.0.0/24"), node("n1", ""))
	assign(t, al, "n1", "k8s-pod-network.a")
	if _, err := al.ReleaseByHandle(ctx, "k8s-pod-network.a"); err != nil {
		t.Fatal(err)
	}
	_, err := (Deleter{Client: s, Settle: -1}).DeletePool(ctx, "p", datastore.DeleteOptions{ResourceVersion: "999"})
	if !errors.Is(err, datastore.ErrConflict) {
		t.Fatalf("delete with a stale version: %v, want a conflict", err)
	}
	if got := names(t, s, v3.KindIPAMBlock); len(got) != 1 {
		t.Fatalf("blocks %v: nothing should have been released", got)
	}
}

func TestPlanNode(t *testing.T) {
	n := node("n", "10.0.0.1")
	n.Spec.BGP = &v3.NodeBGPSpec{IPv4IPIPTunnelAddr: "10.0.0.2"}
	n.Spec.Wireguard = &v3.NodeWireguardSpec{InterfaceIPv4Address: "10.0.0.3", InterfaceIPv6Address: "fd00::3"}
	w := wep("n", "a", netip.MustParseAddr("10.0.0.9"))
	w.Spec.IPNetworks = append(w.Spec.IPNetworks, "bogus")
	p := PlanNode("n", NodeInputs{
		Node:          n,
		Endpoints:     []v3.Resource{w, wep("n-x", "b", netip.MustParseAddr("10.0.0.10"))},
		Peers:         []v3.Resource{peer("p", "n"), peer("q", "")},
		HostEndpoints: []v3.Resource{hep("h", "n")},
	})
	want := NodePlan{
		Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3"),
			netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("fd00::3")},
		Delete: []datastore.Key{
			{Kind: v3.KindWorkloadEndpoint, Namespace: "default", Name: "n-k8s-a-eth0"},
			{Kind: v3.KindBGPPeer, Name: "p"},
			{Kind: v3.KindFelixConfiguration, Name: "node.n"},
			{Kind: v3.KindBGPConfiguration, Name: "node.n"},
			{Kind: v3.KindHostEndpoint, Name: "h"},
		},
		Unparsed: []string{"bogus"},
	}
	if d := cmp.Diff(want, p, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Fatalf("plan (-want +got):\n%s", d)
	}
}

// TestDeleteDamagedRecords: a Node or IPPool whose record cannot be
// decoded is still deleted (with what can be cleaned up without it).
func TestDeleteDamagedRecords(t *testing.T) {
	ctx := context.Background()
	s := ipamtest.NewStore()
	al := ipam.New(s, ipam.Config{})
	mustCreate(t, s, pool("p", "10.0.0.0/24"), node("n1", ""))
	a := assign(t, al, "n1", "k8s-pod-network.a")
	mustCreate(t, s, wep("n1", "a", a), peer("n1-peer", "n1"))
	s.Fail = func(op string, k datastore.Key) error {
		if op == "get" && (k.Kind == v3.KindIPPool || k.Kind == v3.KindNode) {
			return datastore.ErrUndecodable
		}
		return nil
	}
	d := Deleter{Client: s, Settle: -1}
	if _, err := d.Delete(ctx, datastore.Key{Kind: v3.KindNode, Name: "n1"}, datastore.DeleteOptions{}); err != nil {
		t.Fatalf("deleting a damaged node: %v", err)
	}
	for _, kind := range []string{v3.KindNode, v3.KindWorkloadEndpoint, v3.KindBGPPeer, v3.KindIPAMHandle, v3.KindBlockAffinity, v3.KindIPAMBlock} {
		if got := names(t, s, kind); len(got) != 0 {
			t.Errorf("%s left after deleting the damaged node: %v", kind, got)
		}
	}
	if _, err := d.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "p"}, datastore.DeleteOptions{}); err != nil {
		t.Fatalf("deleting a damaged pool: %v", err)
	}
	if got := names(t, s, v3.KindIPPool); len(got) != 0 {
		t.Errorf("pools left: %v", got)
	}
}
