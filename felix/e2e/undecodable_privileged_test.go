//go:build privileged && integration

package e2e

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedUndecodableRecordsDoNotStallPolicy: records that cannot
// be decoded, written at Calico's etcd keys behind the client's back (a
// GlobalNetworkPolicy whose selector is a number, a truncated Profile, a
// truncated WorkloadEndpoint), must not stop felix following the rest:
// with them present, deleting a Deny policy is applied, a new pod gets
// connectivity and a changed profile is enforced, each proven by real
// connections.
func TestPrivilegedUndecodableRecordsDoNotStallPolicy(t *testing.T) {
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
	putRaw := func(key, val string) {
		t.Helper()
		if _, err := raw.Put(ctx, key, val); err != nil {
			t.Fatalf("writing %s: %v", key, err)
		}
	}

	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	deny := ct.GNP("deny-web", "default", ct.Ptr(1.0), "app == 'web'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)
	for _, r := range []v3.Resource{
		ct.NSProfile("prod", map[string]string{"team": "a"}),
		ct.NSProfile("dev", map[string]string{"team": "b"}),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
		deny,
	} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	dp := runDaemon(t, c, nodeNS, nil)
	eventually(t, 10*time.Second, "programmed, client->web denied by the GNP", func() bool { return dp.InSync() && !client.tcp(web, tcpPortA) })

	// The records an operator's etcdctl could leave behind.
	const res = "/calico/resources/v3/projectcalico.org/"
	putRaw(res+"globalnetworkpolicies/x", `{"kind":"GlobalNetworkPolicy","apiVersion":"projectcalico.org/v3","metadata":{"name":"x"},"spec":{"selector":123}}`)
	putRaw(res+"profiles/broken", `{"kind":"Profile","apiVersion":"projectcalico.org/v3","metadata":{"name":"broken"},"spec":{"ingress":[{"act`)
	putRaw(res+"workloadendpoints/prod/node1-k8s-broken-eth0", `{"kind":"WorkloadEndpoint","apiVersion":"projectcalico.org/v3","metadata":{"name":"node1-k8s-broken-eth0","namespace":"prod"},"spec":{"ipNetworks":"10.65.0.9/32"}}`)

	// Deleting the Deny policy is applied.
	if _, err := c.Delete(ctx, datastore.KeyOf(deny), datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "deny deleted with a bad GNP present: client->web allowed", func() bool { return client.tcp(web, tcpPortA) })

	// A new pod gets connectivity.
	late := newPod(t, nodeNS, "late", "calidddd", "10.65.0.4")
	if _, err := c.Create(ctx, ct.WEP("prod", "late", node, late.iface, late.ip.String(), map[string]string{"app": "late"})); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "new pod reachable with a bad WEP present", func() bool { return client.tcp(late, tcpPortA) })

	// A changed profile is enforced: prod's namespace profile now denies
	// ingress.
	cur, err := c.Get(ctx, datastore.Key{Kind: v3.KindProfile, Name: "kns.prod"})
	if err != nil {
		t.Fatal(err)
	}
	p := cur.(*v3.Profile)
	p.Spec.Ingress = []v3.Rule{{Action: v3.Deny}}
	if _, err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "changed profile enforced with a bad profile present: client->web denied", func() bool {
		return !client.tcp(web, tcpPortA) && !client.tcp(late, tcpPortA)
	})
}
