//go:build integration

package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/testservers"
)

// onlyClient hides ReadMany, so datastore.ReadMany takes its fallback.
type onlyClient struct{ datastore.Client }

// TestReadMany: one transaction answers Gets and Lists (namespaced or not;
// a node restriction refused but for BlockAffinities) exactly as the separate calls do, at one
// revision; per-request failures stay per request.
func TestReadMany(t *testing.T) {
	server := testservers.StartEtcd(t)
	c, err := New(Config{Endpoints: []string{server.Endpoint()}, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	for i, n := range []string{"a-1", "a-2", "ab-1", "b-1"} {
		cidr := fmt.Sprintf("10.%d.0.0/16", i) // pools may not overlap
		p := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: v3.IPPoolSpec{CIDR: cidr}}
		if _, err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"ns1", "ns2", "x"} {
		for _, n := range []string{"x-1", "y-1"} {
			s := &v3.NetworkSet{TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkSet}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}
			if _, err := c.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	reqs := []datastore.ReadRequest{
		{Key: datastore.Key{Kind: v3.KindIPPool, Name: "a-1"}},
		{Key: datastore.Key{Kind: v3.KindIPPool, Name: "zzz"}},
		{Key: datastore.Key{Kind: "NoSuchKind", Name: "x"}},
		{Key: datastore.Key{Kind: v3.KindIPPool}, List: true},
		{Key: datastore.Key{Kind: v3.KindIPPool}, List: true, Node: "a"},
		{Key: datastore.Key{Kind: v3.KindBlockAffinity}, List: true, Node: "none"},
		{Key: datastore.Key{Kind: v3.KindNetworkSet}, List: true},
		{Key: datastore.Key{Kind: v3.KindNetworkSet, Namespace: "ns1"}, List: true},
		{Key: datastore.Key{Kind: v3.KindNetworkSet, Namespace: "ns1", Name: "y-1"}},
	}
	want := []string{
		"get IPPool(a-1)",
		"err not-found",
		"err other",
		"list [/a-1 /a-2 /ab-1 /b-1]",
		"err other",
		"list []",
		"list [ns1/x-1 ns1/y-1 ns2/x-1 ns2/y-1 x/x-1 x/y-1]",
		"list [ns1/x-1 ns1/y-1]",
		"get NetworkSet(ns1/y-1)",
	}
	got, err := c.ReadMany(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, summarize(got)); d != "" {
		t.Errorf("ReadMany (-want +got):\n%s", d)
	}
	rev := got[3].List.Revision
	for _, i := range []int{5, 6, 7} {
		if got[i].List.Revision != rev {
			t.Errorf("result %d at revision %s, want one revision %s", i, got[i].List.Revision, rev)
		}
	}
	if g, err := c.Get(ctx, reqs[0].Key); err != nil || g.GetResourceVersion() != got[0].Object.GetResourceVersion() {
		t.Errorf("Get gives version %v (err %v), ReadMany %s", g.GetResourceVersion(), err, got[0].Object.GetResourceVersion())
	}
	fallback, err := datastore.ReadMany(ctx, onlyClient{c}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, summarize(fallback)); d != "" {
		t.Errorf("fallback (-want +got):\n%s", d)
	}

	server.Stop()
	if _, err := c.ReadMany(ctx, reqs[:1]); !errors.Is(err, datastore.ErrUnavailable) {
		t.Errorf("store down: got %v, want ErrUnavailable", err)
	}
}

func summarize(rs []datastore.ReadResult) []string {
	var out []string
	for _, r := range rs {
		switch {
		case errors.Is(r.Err, datastore.ErrNotFound):
			out = append(out, "err not-found")
		case r.Err != nil:
			out = append(out, "err other")
		case r.List != nil:
			names := []string{}
			for _, it := range r.List.Items {
				names = append(names, it.GetNamespace()+"/"+it.GetName())
			}
			out = append(out, fmt.Sprint("list ", names))
		default:
			out = append(out, "get "+datastore.KeyOf(r.Object).String())
		}
	}
	return out
}
