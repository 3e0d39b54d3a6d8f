//go:build integration

package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestIntegrationIPAMCalicoLayout drives the IPAM kinds through the client
// over records a Calico cluster wrote (raw puts in libcalico-go's
// format): get by v3 name across the host and virtual affinity folders,
// list, name-prefix reads, watch (affinity watchers see no block or
// handle traffic), CAS updates with a stable uid, and deleting an
// undecodable record by name.
func TestIntegrationIPAMCalicoLayout(t *testing.T) {
	server := testservers.StartEtcd(t)
	raw := rawClient(t, server.Endpoint())
	c, err := New(Config{Endpoints: []string{server.Endpoint()}, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	put := func(key, val string) {
		t.Helper()
		if _, err := raw.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
	}
	put("/calico/ipam/v2/host/node-1/ipv4/block/10.0.0.0-26", `{"state":"confirmed","deleted":false}`)
	put("/calico/ipam/v2/host/node-1/ipv6/block/fd00::-122", `{"state":"confirmed","deleted":false}`)
	put("/calico/ipam/v2/host/node-10/ipv4/block/10.0.1.0-26", `{"state":"confirmed","deleted":false}`)
	put("/calico/ipam/v2/virtual/vm-1/ipv4/block/10.0.0.64-26", `{"state":"pending","deleted":false}`)

	w, err := c.Watch(ctx, v3.KindBlockAffinity, datastore.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	got, err := c.Get(ctx, datastore.Key{Kind: v3.KindBlockAffinity, Name: "vm-1-10-0-0-64-26"})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.(*v3.BlockAffinity).Spec; s.Node != "vm-1" || s.Type != "virtual" || s.CIDR != "10.0.0.64/26" || s.State != v3.BlockAffinityStatePending {
		t.Errorf("virtual affinity read as %+v", s)
	}
	l, err := c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil || len(l.Items) != 4 || len(l.Bad) != 0 {
		t.Fatalf("list: %v, %d items, %d bad; want 4", err, len(l.Items), len(l.Bad))
	}
	res, err := datastore.ReadMany(ctx, c, []datastore.ReadRequest{
		{Key: datastore.Key{Kind: v3.KindBlockAffinity}, List: true, Node: "node-1"},
		{Key: datastore.Key{Kind: v3.KindBlockAffinity, Name: "node-1-fd00---122"}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("ReadMany: %v %+v", err, res)
	}
	var names []string
	for _, it := range res[0].List.Items {
		names = append(names, it.GetName())
	}
	if len(names) != 2 || names[0] != "node-1-10-0-0-0-26" || names[1] != "node-1-fd00---122" {
		t.Errorf("node-1's affinities = %q (not node-10's)", names)
	}

	// Tabby's writes: block, handle, affinity.
	block := &v3.IPAMBlock{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPAMBlock}, ObjectMeta: metav1.ObjectMeta{Name: "10-0-2-0-30"},
		Spec: v3.IPAMBlockSpec{CIDR: "10.0.2.0/30", Allocations: make([]*int, 4), Unallocated: []int{0, 1, 2, 3}, Attributes: []v3.AllocationAttribute{}}}
	cb, err := c.Create(ctx, block)
	if err != nil {
		t.Fatal(err)
	}
	b := cb.(*v3.IPAMBlock)
	b.Spec.SequenceNumber = 1
	ub, err := c.Update(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPAMBlock, Name: "10-0-2-0-30"})
	if err != nil {
		t.Fatal(err)
	}
	if rb.GetUID() != cb.GetUID() || rb.GetUID() == "" || rb.GetResourceVersion() != ub.GetResourceVersion() {
		t.Errorf("uid %q rv %q after update; created uid %q, updated rv %q", rb.GetUID(), rb.GetResourceVersion(), cb.GetUID(), ub.GetResourceVersion())
	}
	b.Spec.SequenceNumber = 2 // stale revision
	if _, err := c.Update(ctx, b); !errors.Is(err, datastore.ErrConflict) {
		t.Errorf("stale update = %v, want a conflict", err)
	}
	if _, err := c.Create(ctx, &v3.IPAMHandle{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPAMHandle}, ObjectMeta: metav1.ObjectMeta{Name: "h1"},
		Spec: v3.IPAMHandleSpec{HandleID: "h1", Block: map[string]int{}}}); err != nil {
		t.Fatal(err)
	}
	aff := &v3.BlockAffinity{TypeMeta: metav1.TypeMeta{Kind: v3.KindBlockAffinity}, ObjectMeta: metav1.ObjectMeta{Name: "node-2-10-0-2-0-30"},
		Spec: v3.BlockAffinitySpec{State: v3.BlockAffinityStateConfirmed, Node: "node-2", CIDR: "10.0.2.0/30"}}
	if _, err := c.Create(ctx, aff); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"/calico/ipam/v2/host/node-2/ipv4/block/10.0.2.0-30": `{"state":"confirmed","deleted":false}`,
		"/calico/ipam/v2/handle/h1":                          `{"block":{},"deleted":false}`,
		"/calico/ipam/v2/assignment/ipv4/block/10.0.2.0-30":  `{"cidr":"10.0.2.0/30","affinity":null,"allocations":[null,null,null,null],"unallocated":[0,1,2,3],"attributes":[],"sequenceNumber":1,"sequenceNumberForAllocation":null,"deleted":false}`,
	} {
		r, err := raw.Get(ctx, key)
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != want {
			t.Errorf("raw %s = %v (err %v), want %s", key, r.Kvs, err, want)
		}
	}
	// The affinity watch sees the affinity, not the block and handle.
	select {
	case ev := <-w.ResultChan():
		if ev.Type != datastore.EventAdded || ev.Object == nil || ev.Object.GetName() != "node-2-10-0-2-0-30" {
			t.Errorf("first affinity event %+v, want node-2's affinity added", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no affinity event")
	}

	// A bad record is reported and can be deleted by its name.
	put("/calico/ipam/v2/virtual/vm-2/ipv4/block/10.0.3.0-26", `{"state":`)
	l, err = c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil || len(l.Bad) != 1 || l.Bad[0].Key.Name != "vm-2-10-0-3-0-26" {
		t.Fatalf("list with a torn record: %v, bad %+v", err, l.Bad)
	}
	if _, err := c.Delete(ctx, datastore.Key{Kind: v3.KindBlockAffinity, Name: "vm-2-10-0-3-0-26"}, datastore.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the torn record: %v", err)
	}
	if _, err := c.Delete(ctx, datastore.Key{Kind: v3.KindBlockAffinity, Name: "vm-1-10-0-0-64-26"}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, _ := raw.Get(ctx, "/calico/ipam/v2/virtual/vm-1/ipv4/block/10.0.0.64-26"); len(r.Kvs) != 0 {
		t.Error("virtual affinity still stored after delete by name")
	}
	if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindBlockAffinity, Name: "vm-1-10-0-0-64-26"}); !errors.Is(err, datastore.ErrNotFound) {
		t.Errorf("get after delete = %v, want not found", err)
	}
}
