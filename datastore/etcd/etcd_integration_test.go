//go:build integration

package etcd

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dstest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestSuite runs the shared datastore suite against a real etcd.
func TestSuite(t *testing.T) {
	server := testservers.StartEtcd(t)
	runSuite(t, server, []string{server.Endpoint()})
}

// TestSuiteOverUnixSocketAfterDeadEndpoint runs it again with a first
// endpoint nobody listens on, then the server's unix socket: every call
// (unary and watch) must move on to the socket.
func TestSuiteOverUnixSocketAfterDeadEndpoint(t *testing.T) {
	server := testservers.StartEtcd(t)
	runSuite(t, server, []string{"http://127.0.0.1:1", server.UnixEndpoint()})
}

func runSuite(t *testing.T, server *testservers.Etcd, endpoints []string) {
	raw := rawClient(t, server.Endpoint())
	dstest.Run(t, dstest.Harness{
		New: func(t *testing.T) datastore.Client {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := raw.Delete(ctx, "/calico/", clientv3.WithPrefix()); err != nil {
				t.Fatalf("emptying etcd: %v", err)
			}
			c, err := New(Config{Endpoints: endpoints, RequestTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
		ForceRevisionGone: func(t *testing.T, _ datastore.Client, _ string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := raw.Get(ctx, "/compact-marker")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
				t.Fatalf("compacting: %v", err)
			}
		},
		StopServer:  func(*testing.T) { server.Stop() },
		StartServer: func(*testing.T) { server.Start() },
		PutUndecodable: func(t *testing.T, k datastore.Key) {
			// Truncated JSON, as a torn etcdctl put leaves it.
			putRaw(t, raw, k, `{"kind":"`+k.Kind+`","apiVersion":"projectcalico.org/v3","metadata":{"name":"`+k.Name+`"},"spec":{"cid`)
		},
	})
}

// putRaw stores val at the etcd key of k, behind the client's back.
func putRaw(t *testing.T, raw *clientv3.Client, k datastore.Key, val string) {
	t.Helper()
	info, ok := v3.LookupKind(k.Kind)
	if !ok {
		t.Fatalf("unknown kind %s", k.Kind)
	}
	key, err := keyFor(info, k)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := raw.Put(ctx, key, val); err != nil {
		t.Fatalf("writing %s: %v", key, err)
	}
}

func rawClient(t testing.TB, endpoint string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestKeyLayout checks resources land at Calico's etcd keys.
func TestKeyLayout(t *testing.T) {
	server := testservers.StartEtcd(t)
	raw := rawClient(t, server.Endpoint())
	c, err := New(Config{Endpoints: []string{server.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	objs := []v3.Resource{
		&v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v3.IPPoolSpec{CIDR: "10.0.0.0/16"}},
		&v3.NetworkSet{TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkSet}, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}},
	}
	for _, o := range objs {
		if _, err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{
		"/calico/resources/v3/projectcalico.org/ippools/p",
		"/calico/resources/v3/projectcalico.org/networksets/ns/s",
	} {
		resp, err := raw.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("nothing stored at %s (err %v)", key, err)
		}
	}
}

// TestUnreachable: a store that is down yields an error naming the
// endpoint, not a hang.
func TestUnreachable(t *testing.T) {
	c, err := New(Config{Endpoints: []string{"http://127.0.0.1:1"}, DialTimeout: time.Second, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Get(context.Background(), datastore.Key{Kind: v3.KindIPPool, Name: "x"})
	if err == nil || !errorsIs(err, datastore.ErrUnavailable) {
		t.Fatalf("got %v, want ErrUnavailable", err)
	}
	if want := "127.0.0.1:1"; !contains(err.Error(), want) {
		t.Fatalf("error %q does not name the endpoint %s", err, want)
	}
}

func benchClient(b *testing.B) *Client {
	server := testservers.StartEtcd(b)
	c, err := New(Config{Endpoints: []string{server.Endpoint()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

func benchPool(i int) *v3.IPPool {
	return &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool},
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + strconv.Itoa(i)},
		Spec:       v3.IPPoolSpec{CIDR: fmt.Sprintf("10.%d.%d.0/24", i/256%256, i%256)},
	}
}

func BenchmarkCreate(b *testing.B) {
	c := benchClient(b)
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
	ctx := context.Background()
	if _, err := c.Create(ctx, benchPool(0)); err != nil {
		b.Fatal(err)
	}
	k := datastore.Key{Kind: v3.KindIPPool, Name: "bench-0"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Get(ctx, k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpdateCAS(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	cur, err := c.Create(ctx, benchPool(0))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := cur.(*v3.IPPool)
		p.Spec.Disabled = !p.Spec.Disabled
		if cur, err = c.Update(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
}
