//go:build privileged

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// putRaw writes val at an etcd key behind Tabby's back, as an operator's
// etcdctl could.
func (c *cluster) putRaw(key, val string) {
	c.t.Helper()
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{c.etcd.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raw.Put(ctx, key, val); err != nil {
		c.t.Fatalf("writing %s: %v", key, err)
	}
}

// TestPrivilegedUndecodableRecords: records that cannot be decoded (an
// IPPool, one of this node's BlockAffinities, a pod's own
// WorkloadEndpoint) do not fail the CNI: ADD uses the good pools and
// blocks, and a pod whose endpoint record is bad is still deleted
// completely.
func TestPrivilegedUndecodableRecords(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.66.0.0/24"}})
	c.putRaw("/calico/resources/v3/projectcalico.org/ippools/broken",
		`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"broken"},"spec":{"cidr":"10.67.0.0/24","blockSize":"big"}}`)
	a := c.newPod("a")
	c.mustAdd(a)
	if !strings.HasPrefix(a.ip(false), "10.66.0.") {
		t.Errorf("pod a got %s, want an address of the good pool", a.ip(false))
	}

	// A bad affinity of this node, for the next block the node would
	// claim, and one for a block it holds.
	c.putRaw("/calico/ipam/v2/host/node1/ipv4/block/10.66.0.64-26", `{"state":`) // Calico's key, torn value
	c.putRaw("/calico/ipam/v2/host/node1/ipv4/block/10.66.0.0-26", `{"state":`)
	var more []*pod
	for _, name := range []string{"b", "b2"} {
		p := c.newPod(name)
		if err := c.add(p); err != nil {
			code, msg := cniCode(err)
			t.Fatalf("ADD with a bad block affinity on the node: code %d: %s", code, msg)
		}
		more = append(more, p)
	}

	// The pod's own endpoint record turns bad: DEL still removes it, the
	// veth and the address.
	ctx := context.Background()
	weps, err := c.client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wepOfA string
	for _, w := range weps.Items {
		if w.(*v3.WorkloadEndpoint).Spec.ContainerID == a.rt.ContainerID {
			wepOfA = w.GetName()
		}
	}
	if wepOfA == "" {
		t.Fatal("no endpoint for pod a")
	}
	c.putRaw("/calico/resources/v3/projectcalico.org/workloadendpoints/default/"+wepOfA, `{"kind":"WorkloadEndpoint","spec":{"ipNetworks":`)
	if err := c.del(a); err != nil {
		code, msg := cniCode(err)
		t.Fatalf("DEL of a pod whose endpoint record is undecodable: code %d: %s", code, msg)
	}
	for _, p := range more {
		if err := c.del(p); err != nil {
			t.Fatal(err)
		}
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	if l, err := c.client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{}); err != nil || len(l.Bad) != 0 {
		t.Errorf("endpoint records after DEL: %v, bad %+v", err, l.Bad)
	}
}

// TestPrivilegedOnlyPoolUndecodable: when the only pool cannot be
// decoded, ADD fails and says so, naming the record.
func TestPrivilegedOnlyPoolUndecodable(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	c.putRaw("/calico/resources/v3/projectcalico.org/ippools/broken",
		`{"kind":"IPPool","apiVersion":"projectcalico.org/v3","metadata":{"name":"broken"},"spec":{"cidr":"10.67.0.0/24","blockSize":"big"}}`)
	err := c.add(c.newPod("a"))
	if err == nil {
		t.Fatal("ADD succeeded with no decodable pool")
	}
	code, msg := cniCode(err)
	if !strings.Contains(msg, "cannot be decoded") || !strings.Contains(msg, "/ippools/broken") {
		t.Errorf("ADD error (code %d) does not say the pool cannot be decoded: %s", code, msg)
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
