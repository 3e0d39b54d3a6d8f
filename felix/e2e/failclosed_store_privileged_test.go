//go:build privileged && integration

package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedStoredServicesDenyFailsClosed: the etcd datastore refuses
// a policy with a services match (felix follows Services only on the
// Kubernetes datastore), but one can still be in the store (written
// by an older version, or directly). Put there raw, under Calico's key, a
// Deny with a services match is enforced by the whole felix pipeline as a
// widened Deny (real TCP blocked; UDP reaches the policy's next rule, an
// Allow), counted in
// felix_calc_unrenderable_rules_total, and never skipped.
func TestPrivilegedStoredServicesDenyFailsClosed(t *testing.T) {
	e := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	ctx := context.Background()

	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	for _, r := range []v3.Resource{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
	} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	reg := prometheus.NewRegistry()
	metrics := daemon.NewMetrics(reg)
	dp := runDaemon(t, c, nodeNS, metrics)
	eventually(t, 10*time.Second, "programmed; client->web allowed by the profiles", func() bool {
		return dp.InSync() && client.tcp(web, tcpPortA) && client.udp(web)
	})

	deny := ct.GNP("deny-api", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{{
		Action: v3.Deny, Protocol: ct.Proto("TCP"),
		Source: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api", Namespace: "dev"}},
	}, {Action: v3.Allow}}, nil)
	if _, err := c.Create(ctx, deny); !errors.Is(err, datastore.ErrInvalid) {
		t.Fatalf("creating a policy with a services match through the datastore: %v, want refused as invalid", err)
	}
	body, err := v3.EncodeJSON(deny)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, "/calico/resources/v3/projectcalico.org/globalnetworkpolicies/deny-api", string(body)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the stored Deny enforced, widened to all TCP", func() bool { return !client.tcp(web, tcpPortA) })
	if !client.udp(web) {
		t.Error("client->web udp denied; the widened Deny is TCP only")
	}
	if got := testutil.ToFloat64(metrics.Unrenderable.WithLabelValues("widened", "services-match")); got != 1 {
		t.Errorf("felix_calc_unrenderable_rules_total{widened,services-match} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.Problems); got != 0 {
		t.Errorf("felix_calc_bad_input = %v, want 0: the policy is not skipped", got)
	}
}
