//go:build integration

package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/node/registration"
)

// TestIntegrationAddressConflict: registering with an address another Node
// has fails naming that Node (Calico's check) and writes nothing; the
// node's own earlier address and a free one are fine.
func TestIntegrationAddressConflict(t *testing.T) {
	e := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for name, addr := range map[string]string{"other": "10.0.0.5/24", "me": "10.0.0.6/24"} {
		if _, err := c.Create(ctx, &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: addr, IPv6Address: "fd00::5/64"}}}); err != nil {
			t.Fatal(err)
		}
	}
	check := conflictCheck(c, "me")
	err = check(ctx, "10.0.0.5/16", "")
	if !errors.Is(err, ErrAddressConflict) || !strings.Contains(err.Error(), "node other already uses 10.0.0.5") {
		t.Errorf("IPv4 of another node: %v", err)
	}
	if err := check(ctx, "", "fd00::5/64"); !errors.Is(err, ErrAddressConflict) {
		t.Errorf("IPv6 of another node: %v", err)
	}
	if err := check(ctx, "10.0.0.6/24", ""); err != nil {
		t.Errorf("its own address: %v", err)
	}
	if err := check(ctx, "10.0.0.7/24", "fd00::7/64"); err != nil {
		t.Errorf("free addresses: %v", err)
	}
	// Through Register: refused, nothing written.
	if _, err := registration.Register(ctx, c, registration.Config{NodeName: "me", IPv4: "10.0.0.5/24", IPv6: "none", Check: check}, registration.Env{}); !errors.Is(err, ErrAddressConflict) {
		t.Fatalf("Register with a conflicting address: %v", err)
	}
	r, _ := c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: "me"})
	if got := r.(*v3.Node).Spec.BGP.IPv4Address; got != "10.0.0.6/24" {
		t.Errorf("node me's address became %s after a refused registration", got)
	}
}
