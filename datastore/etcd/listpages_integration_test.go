//go:build integration

package etcd_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestListPages: a kind listed in pages gives, page after page, exactly
// what one List gives (the same objects, in order), every page read at
// the first page's revision (an object written between two pages is not
// in them), each saying how many the pages hold in all. Over both
// transports (the hand-written one and etcd's library).
func TestListPages(t *testing.T) {
	server := testservers.StartEtcd(t)
	for _, tr := range []struct {
		name string
		new  etcd.NewTransportFunc
	}{{"gateway", nil}, {"library", etcdlib.New}} {
		t.Run(tr.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := etcd.New(etcd.Config{Endpoints: []string{server.Endpoint()}, NewTransport: tr.new})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ns := "lp-" + tr.name
			for i := range 12 {
				if _, err := c.Create(ctx, &v3.NetworkSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%02d", i)}, Spec: v3.NetworkSetSpec{Nets: []string{fmt.Sprintf("10.1.%d.0/24", i)}}}); err != nil {
					t.Fatal(err)
				}
			}
			whole, err := c.List(ctx, v3.KindNetworkSet, datastore.ListOptions{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			var got []v3.Resource
			var sizes []int
			revs := map[string]bool{}
			totals := map[int]bool{}
			err = c.ListPages(ctx, v3.KindNetworkSet, 5, func(p *datastore.List) error {
				if len(sizes) == 0 {
					// Written after the first page was read: not listed.
					if _, err := c.Create(ctx, &v3.NetworkSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s99-late"}, Spec: v3.NetworkSetSpec{Nets: []string{"10.9.0.0/24"}}}); err != nil {
						t.Fatal(err)
					}
				}
				sizes = append(sizes, len(p.Items))
				totals[p.Total] = true
				revs[p.Revision] = true
				for _, o := range p.Items {
					if o.GetNamespace() == ns {
						got = append(got, o)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, whole.Items) {
				t.Fatalf("pages hold %d objects, the list %d (or they differ)", len(got), len(whole.Items))
			}
			if len(revs) != 1 || !revs[whole.Revision] {
				t.Fatalf("pages at revisions %v, the list at %s", revs, whole.Revision)
			}
			if len(sizes) < 3 {
				t.Fatalf("page sizes %v: not paged", sizes)
			}
			// Every page says how many the pages hold in all.
			listed := 0
			for _, n := range sizes {
				listed += n
			}
			if len(totals) != 1 || !totals[listed] {
				t.Fatalf("pages say they hold %v in all; they hold %d", totals, listed)
			}
		})
	}
}
