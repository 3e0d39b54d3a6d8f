//go:build integration

package kdd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// TestUndecodableCustomResources: GlobalNetworkPolicy custom resources
// that violate Tabby's Go types, one written with the dynamic client (a
// port number the CRD's int-or-string schema accepts and the Go type
// refuses) and one stored by writing the API server's etcd directly (a
// selector that is a number, which the schema would refuse), are left out
// of lists and syncers, both syncers keep delivering the good policies,
// and deleting a Deny policy next to them is delivered.
func TestUndecodableCustomResources(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	info, _ := v3.LookupKind(v3.KindGlobalNetworkPolicy)
	deny := ct.GNP("deny-web", "default", ct.Ptr(1.0), "app == 'web'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)
	if _, err := c.Create(ctx, deny); err != nil {
		t.Fatal(err)
	}
	s.writeCR(t, info, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v3.CRDGroupVersion, "kind": v3.KindGlobalNetworkPolicy,
		"metadata": map[string]any{"name": "bad-port"},
		"spec": map[string]any{"selector": "all()", "ingress": []any{map[string]any{
			"action": "Allow", "protocol": "TCP", "destination": map[string]any{"ports": []any{int64(70000)}},
		}}},
	}})
	putInAPIServerEtcd(t, s, "/registry/crd.projectcalico.org/globalnetworkpolicies/bad-selector",
		`{"apiVersion":"crd.projectcalico.org/v1","kind":"GlobalNetworkPolicy","metadata":{"name":"bad-selector","uid":"`+string(uuid.NewUUID())+`","creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"selector":123}}`)

	l, err := c.List(ctx, v3.KindGlobalNetworkPolicy, datastore.ListOptions{})
	if err != nil {
		t.Fatalf("list with undecodable policies: %v", err)
	}
	var bad []string
	for _, b := range l.Bad {
		if !errors.Is(b, datastore.ErrUndecodable) {
			t.Errorf("bad record %v is not ErrUndecodable", b)
		}
		bad = append(bad, b.Key.Name)
	}
	if got := strings.Join(bad, ","); got != "bad-port,bad-selector" {
		t.Errorf("bad records %q, want bad-port,bad-selector (%+v)", got, l.Bad)
	}
	if len(l.Items) != 1 || l.Items[0].GetName() != "deny-web" {
		t.Errorf("listed %d policies, want only deny-web", len(l.Items))
	}
	if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: "bad-selector"}); !errors.Is(err, datastore.ErrUndecodable) {
		t.Errorf("get bad-selector: %v, want ErrUndecodable", err)
	}

	count := func() float64 { return float64(datastore.UndecodableRecords(v3.KindGlobalNetworkPolicy)) }
	for name, syncer := range map[string]func(cb datastore.SyncerCallbacks) datastore.Syncer{
		"WatchSyncer": func(cb datastore.SyncerCallbacks) datastore.Syncer {
			return datastore.NewWatchSyncer(c, []string{v3.KindGlobalNetworkPolicy}, cb, datastore.Backoff{Initial: 50 * time.Millisecond, Max: time.Second})
		},
		"InformerSyncer": func(cb datastore.SyncerCallbacks) datastore.Syncer {
			return NewSyncer(c, []string{v3.KindGlobalNetworkPolicy}, cb)
		},
	} {
		t.Run(name, func(t *testing.T) {
			before := count()
			rec := &recorder{view: map[datastore.Key]v3.Resource{}}
			runSyncer(t, syncer(rec))
			rec.waitFor(t, "in sync with deny-web", func() bool {
				return rec.inSync && rec.keys(v3.KindGlobalNetworkPolicy) == "/deny-web"
			})
			if got := count() - before; got != 2 {
				t.Errorf("counted %v undecodable policies, want 2", got)
			}
		})
	}

	// With a syncer running, the Deny policy's deletion is delivered.
	rec := &recorder{view: map[datastore.Key]v3.Resource{}}
	runSyncer(t, NewSyncer(c, []string{v3.KindGlobalNetworkPolicy}, rec))
	rec.waitFor(t, "deny-web", func() bool { return rec.inSync && rec.keys(v3.KindGlobalNetworkPolicy) == "/deny-web" })
	if _, err := c.Delete(ctx, datastore.KeyOf(deny), datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "deny-web deleted", func() bool { return rec.keys(v3.KindGlobalNetworkPolicy) == "" })
}

// putInAPIServerEtcd writes val at key in the API server's own etcd,
// bypassing the API server's validation.
func putInAPIServerEtcd(t *testing.T, s *testServer, key, val string) {
	t.Helper()
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Etcd.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := ec.Put(ctx, key, val); err != nil {
		t.Fatalf("writing %s: %v", key, err)
	}
}
