//go:build integration

package kdd

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// The benchmarks mirror datastore/etcd's, against a real kube-apiserver
// (watch cache off, as in the tests), without client-side rate limiting.

func benchClient(b *testing.B) *Client {
	return startServer(b).client(b)
}

func benchPool(i int) *v3.IPPool {
	return &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool},
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + strconv.Itoa(i)},
		Spec:       v3.IPPoolSpec{CIDR: fmt.Sprintf("10.%d.%d.0/24", i/256%256, i%256)},
	}
}

// warm creates one object first: the API server delays the first create
// of a custom resource shortly after its CRD is established.
func warm(b *testing.B, c *Client) v3.Resource {
	cur, err := c.Create(context.Background(), &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool},
		ObjectMeta: metav1.ObjectMeta{Name: "warm"},
		Spec:       v3.IPPoolSpec{CIDR: "192.168.0.0/24"},
	})
	if err != nil {
		b.Fatal(err)
	}
	return cur
}

func BenchmarkCreate(b *testing.B) {
	c := benchClient(b)
	warm(b, c)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Create(ctx, benchPool(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	c := benchClient(b)
	warm(b, c)
	ctx := context.Background()
	k := datastore.Key{Kind: v3.KindIPPool, Name: "warm"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Get(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpdateCAS(b *testing.B) {
	c := benchClient(b)
	cur := warm(b, c)
	ctx := context.Background()
	var err error
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := cur.(*v3.IPPool)
		p.Spec.Disabled = !p.Spec.Disabled
		if cur, err = c.Update(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}
