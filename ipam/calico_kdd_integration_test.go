//go:build integration

package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
)

func calicoGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: resource}
}

// calicoKDDBlock is an IPAMBlock custom resource as Calico's IPAM writes
// it: allocated ordinals point at one attribute each (handle and owner)
// and carry the block's sequence number when they were handed out; the
// free ones are listed in unallocated.
func calicoKDDBlock(cidr netip.Prefix, node string, used []int, handle func(ord int) string) *unstructured.Unstructured {
	size := 1 << (32 - cidr.Bits())
	allocs := make([]any, size)
	var attrs []any
	isUsed := map[int]bool{}
	seqs := map[string]any{}
	for i, ord := range used {
		allocs[ord] = int64(i)
		isUsed[ord] = true
		seqs[strconv.Itoa(ord)] = int64(i)
		attrs = append(attrs, map[string]any{
			"handle_id": handle(ord),
			"secondary": map[string]any{"namespace": "default", "node": node, "pod": "calico-" + strconv.Itoa(ord), "timestamp": "2026-01-01 00:00:00 +0000 UTC"},
		})
	}
	var unalloc []any
	for ord := range size {
		if !isUsed[ord] {
			unalloc = append(unalloc, int64(ord))
		}
	}
	name := strings.NewReplacer(".", "-", "/", "-").Replace(cidr.String())
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMBlock",
		"metadata": map[string]any{
			"name":        name,
			"annotations": map[string]any{"projectcalico.org/metadata": `{"creationTimestamp":null}`},
		},
		"spec": map[string]any{
			"cidr": cidr.String(), "affinity": "host:" + node, "allocations": allocs, "unallocated": unalloc,
			"attributes": attrs, "deleted": false, "strictAffinity": false,
			"sequenceNumber": int64(len(used)), "sequenceNumberForAllocation": seqs,
		},
	}}
}

// calicoKDDAffinity is a confirmed BlockAffinity custom resource as Calico
// writes it: with its lookup labels (v3.31 and later) or without (older).
func calicoKDDAffinity(cidr netip.Prefix, node string, labelled bool) *unstructured.Unstructured {
	meta := map[string]any{"name": node + "-" + strings.NewReplacer(".", "-", "/", "-").Replace(cidr.String())}
	if labelled {
		meta["labels"] = map[string]any{
			"projectcalico.org/hostname-hash": kdd.HostnameLabelHash(node),
			"projectcalico.org/affinity-type": "host",
			"projectcalico.org/ip-version":    "4",
		}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "BlockAffinity",
		"metadata": meta,
		"spec":     map[string]any{"state": "confirmed", "node": node, "type": "host", "cidr": cidr.String(), "deleted": "false"},
	}}
}

// TestIntegrationCalicoUnlabelledAffinitiesKDD: affinities written by
// Calico before v3.31 have no lookup labels, so the per-node read of an
// ADD does not see them; before claiming a new block the allocator labels
// the node's (IndexNode, as Calico's UpgradeHost) and uses their room.
// Node names that extend another's (node-1, node-10) never mix.
func TestIntegrationCalicoUnlabelledAffinitiesKDD(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1
	testservers.ApplyCRDs(t, rc, "../manifests/crds")
	dyn := dynamic.NewForConfigOrDie(rc)
	ctx := context.Background()
	old1, new10 := netip.MustParsePrefix("10.1.54.64/26"), netip.MustParsePrefix("10.1.9.0/26")
	handle := func(ord int) string { return fmt.Sprintf("k8s-pod-network.old-%d", ord) }
	for _, u := range []*unstructured.Unstructured{
		calicoKDDBlock(old1, "node-1", seq(0, 30), handle), calicoKDDBlock(new10, "node-10", seq(0, 3), handle),
	} {
		if _, err := dyn.Resource(calicoGVR("ipamblocks")).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []*unstructured.Unstructured{calicoKDDAffinity(old1, "node-1", false), calicoKDDAffinity(new10, "node-10", true)} {
		if _, err := dyn.Resource(calicoGVR("blockaffinities")).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := kdd.New(kdd.Config{REST: rc, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	mustCreate(t, c, pool("p", "10.1.0.0/16", 26))
	nodeAffinities := func(node string) []string {
		t.Helper()
		l, err := c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{Node: node})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range l.Items {
			out = append(out, it.(*v3.BlockAffinity).Spec.CIDR)
		}
		return out
	}
	if got := nodeAffinities("node-1"); len(got) != 0 {
		t.Fatalf("node-1's unlabelled affinity listed by node before labelling: %v", got)
	}
	if got := nodeAffinities("node-10"); len(got) != 1 || got[0] != new10.String() {
		t.Fatalf("node-10's affinities = %v, want [%s]", got, new10)
	}

	a := New(c, Config{})
	ip := mustAssign(t, a, podArgs("node-1", "first", 1, 0))[0]
	if !old1.Contains(ip) {
		t.Errorf("node-1's first allocation got %s, want one from its older affine block %s", ip, old1)
	}
	if got := nodeAffinities("node-1"); len(got) != 1 || got[0] != old1.String() {
		t.Errorf("node-1's affinities after the allocation = %v, want [%s]", got, old1)
	}
	if n, err := a.IndexNode(ctx, "node-1"); n != 0 || err != nil {
		t.Errorf("IndexNode again = %d, %v; want 0 (all labelled)", n, err)
	}
	if bl, err := c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{}); err != nil || len(bl.Items) != 2 {
		t.Errorf("blocks after the allocation: %v (%v); want the 2 there were", bl, err)
	}
	if _, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{Node: "node-1"}); !errors.Is(err, datastore.ErrInvalid) {
		t.Errorf("a list of IPPools restricted to a node: %v, want ErrInvalid", err)
	}
}

// TestIntegrationCalicoFormatKDD: a kube-apiserver with Calico's CRDs
// holds a Calico cluster's IPAM state, written through the dynamic client
// in Calico's crd.projectcalico.org/v1 format (IPAMBlocks, BlockAffinities
// with spec.deleted the string "false" and Calico's lookup labels,
// IPAMHandles named by their lowercased handle, the ipamconfigs object
// "default"): node-1 has two partly used affine blocks, node-2 one. Tabby
// makes 1,000 allocations for node-1: none duplicates an address Calico
// gave or another new one, node-1's existing blocks fill first, Calico's
// IPAMConfig is honoured (strictAffinity: no borrowing from node-2;
// maxBlocksPerHost: node-1 stops at 18 blocks), and what Tabby wrote is in
// Calico's format.
func TestIntegrationCalicoFormatKDD(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1
	testservers.ApplyCRDs(t, rc, "../manifests/crds")
	dyn := dynamic.NewForConfigOrDie(rc)
	ctx := context.Background()
	create := func(resource string, u *unstructured.Unstructured) {
		t.Helper()
		if _, err := dyn.Resource(calicoGVR(resource)).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("writing Calico's %s %s: %v", resource, u.GetName(), err)
		}
	}

	// Calico's state: handles are k8s-pod-network.calico-<node>-<ordinal>.
	type calicoBlock struct {
		cidr netip.Prefix
		node string
		used []int
	}
	blocks := []calicoBlock{
		{netip.MustParsePrefix("10.1.54.64/26"), "node-1", seq(0, 30)},        // 34 free
		{netip.MustParsePrefix("10.1.54.128/26"), "node-1", seq(2, 62)},       // 4 free: 0, 1, 62, 63
		{netip.MustParsePrefix("10.1.22.0/26"), "node-2", []int{1, 5, 9, 40}}, // node-2's, never borrowed
	}
	calicoIPs := map[netip.Addr]string{}
	for _, b := range blocks {
		handle := func(ord int) string {
			return fmt.Sprintf("k8s-pod-network.Calico-%s-%s-%d", b.node, strings.ReplaceAll(b.cidr.Addr().String(), ".", "-"), ord)
		}
		create("ipamblocks", calicoKDDBlock(b.cidr, b.node, b.used, handle))
		create("blockaffinities", calicoKDDAffinity(b.cidr, b.node, true))
		for _, ord := range b.used {
			h := handle(ord)
			create("ipamhandles", &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMHandle",
				"metadata": map[string]any{"name": strings.ToLower(h)},
				"spec":     map[string]any{"handleID": h, "block": map[string]any{b.cidr.String(): int64(1)}, "deleted": false},
			}})
			calicoIPs[nthAddr(b.cidr, ord)] = h
		}
	}
	create("ipamconfigs", &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "IPAMConfig",
		"metadata": map[string]any{"name": "default"},
		"spec":     map[string]any{"strictAffinity": true, "autoAllocateBlocks": true, "maxBlocksPerHost": int64(18)},
	}})

	c, err := kdd.New(kdd.Config{REST: rc, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	mustCreate(t, c, pool("p", "10.1.0.0/16", 26))

	// Tabby reads Calico's records.
	cfg, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"})
	if err != nil {
		t.Fatalf("Calico's ipamconfigs/default through Tabby: %v", err)
	}
	if s := cfg.(*v3.IPAMConfiguration).Spec; !s.StrictAffinity || s.MaxBlocksPerHost != 18 || s.AutoAllocateBlocks == nil || !*s.AutoAllocateBlocks {
		t.Fatalf("Calico's IPAMConfig read as %+v", s)
	}
	before := checkStore(t, c)
	if len(before.byIP) != len(calicoIPs) || len(before.blocks) != 3 || len(before.handles) != len(calicoIPs) {
		t.Fatalf("read %d allocations, %d blocks, %d handles from Calico's records; want %d, 3, %d", len(before.byIP), len(before.blocks), len(before.handles), len(calicoIPs), len(calicoIPs))
	}
	for cidr, affs := range before.affinities {
		if len(affs) != 1 || affs[0].Spec.Deleted || affs[0].Spec.State != v3.BlockAffinityStateConfirmed {
			t.Errorf("Calico's affinity of %s read as %+v", cidr, affs)
		}
	}

	a := New(c, Config{})
	const n = 1000
	existingFree := 34 + 4
	seen := map[netip.Addr]string{}
	dups := 0
	start := time.Now()
	for i := range n {
		args := podArgs("node-1", fmt.Sprintf("tabby-%04d", i), 1, 0)
		for _, ip := range mustAssign(t, a, args) {
			if h, ok := calicoIPs[ip]; ok {
				dups++
				t.Errorf("DUPLICATE: %s handed to %s was Calico's allocation for %s", ip, args.HandleID, h)
			}
			if h, ok := seen[ip]; ok {
				dups++
				t.Errorf("DUPLICATE: %s handed to %s and %s", ip, h, args.HandleID)
			}
			seen[ip] = args.HandleID
			inExisting := blocks[0].cidr.Contains(ip) || blocks[1].cidr.Contains(ip)
			if i < existingFree && !inExisting {
				t.Errorf("allocation %d got %s outside node-1's existing affine blocks", i, ip)
			}
			if blocks[2].cidr.Contains(ip) {
				t.Errorf("allocation %d got %s from node-2's block (strictAffinity)", i, ip)
			}
		}
	}
	elapsed := time.Since(start)

	after := checkStore(t, c)
	if len(after.byIP) != len(calicoIPs)+n {
		t.Errorf("%d allocations in the store, want %d", len(after.byIP), len(calicoIPs)+n)
	}
	for ip, h := range calicoIPs {
		if after.byIP[ip] != h {
			t.Errorf("Calico's allocation %s (%s) now held by %q", ip, h, after.byIP[ip])
		}
	}
	node1Blocks := 0
	for _, b := range after.blocks {
		if b.Spec.Affinity != nil && *b.Spec.Affinity == "host:node-1" {
			node1Blocks++
		}
	}
	t.Logf("%d new allocations for node-1 around %d of Calico's in %s: %d duplicates, node-1 holds %d blocks", n, len(calicoIPs), elapsed.Round(time.Millisecond), dups, node1Blocks)

	// maxBlocksPerHost 18: the 18 blocks hold 1,152 addresses, 90 were
	// Calico's and 1,000 are new; the 62 left go, then node-1 is full
	// (strictAffinity forbids borrowing node-2's free addresses).
	for i := range 1152 - 90 - n {
		mustAssign(t, a, podArgs("node-1", fmt.Sprintf("tabby-more-%02d", i), 1, 0))
	}
	if ips, err := a.AutoAssign(ctx, podArgs("node-1", "one-too-many", 1, 0)); !errors.Is(err, ErrPoolExhausted) {
		t.Errorf("allocation beyond maxBlocksPerHost: %v %v, want ErrPoolExhausted", ips, err)
	}

	// What Tabby wrote is in Calico's format.
	affs, err := dyn.Resource(calicoGVR("blockaffinities")).List(ctx, metav1.ListOptions{LabelSelector: "projectcalico.org/hostname-hash=" + kdd.HostnameLabelHash("node-1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(affs.Items) != 18 {
		t.Errorf("Calico's label lookup finds %d of node-1's affinities, want 18", len(affs.Items))
	}
	for _, u := range affs.Items {
		cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
		deleted, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "deleted")
		want := "node-1-" + strings.NewReplacer(".", "-", "/", "-").Replace(cidr)
		if u.GetName() != want || deleted != "false" || u.GetLabels()["projectcalico.org/ip-version"] != "4" || u.GetLabels()["projectcalico.org/affinity-type"] != "host" {
			t.Errorf("affinity %s (want name %s): deleted %#v labels %v", u.GetName(), want, deleted, u.GetLabels())
		}
	}
	h, err := dyn.Resource(calicoGVR("ipamhandles")).Get(ctx, "k8s-pod-network.tabby-0000", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("handle of tabby-0000 not at Calico's name: %v", err)
	}
	if id, _, _ := unstructured.NestedString(h.Object, "spec", "handleID"); id != "k8s-pod-network.tabby-0000" {
		t.Errorf("handle spec.handleID %q", id)
	}
	for cidr := range after.blocks {
		name := strings.NewReplacer(".", "-", "/", "-").Replace(cidr.String())
		if _, err := dyn.Resource(calicoGVR("ipamblocks")).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("block %s not at Calico's name %s: %v", cidr, name, err)
		}
	}
	cfgCR, err := dyn.Resource(calicoGVR("ipamconfigs")).Get(ctx, "default", metav1.GetOptions{})
	if err != nil || cfgCR.GetKind() != "IPAMConfig" {
		t.Errorf("ipamconfigs/default after the run: %v %v", cfgCR, err)
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// nthAddr is the address at ordinal ord of an IPv4 block.
func nthAddr(block netip.Prefix, ord int) netip.Addr {
	a := block.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(ord)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
