//go:build privileged && integration

package e2e

import (
	"context"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedDaemonWithEtcd runs the whole felix pipeline (datastore
// syncer over a real etcd -> calc -> rules -> drivers in the node
// namespace) and changes policy through the store while real connections
// prove each state.
func TestPrivilegedDaemonWithEtcd(t *testing.T) {
	e := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	for _, r := range []v3.Resource{
		ct.NSProfile("prod", map[string]string{"team": "a"}),
		ct.NSProfile("dev", map[string]string{"team": "b"}),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
	} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}

	dp := runDaemon(t, c, nodeNS, nil)

	eventually(t, 10*time.Second, "programmed and client->web allowed by the profiles", func() bool { return dp.InSync() && client.tcp(web, tcpPortA) })

	deny, err := c.Create(ctx, ct.NP("prod", "default-deny", nil, "all()", ct.Ingress, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "default deny from the store enforced", func() bool { return !client.tcp(web, tcpPortA) })

	allow := ct.NP("prod", "allow-client", ct.Ptr(1.0), "app == 'web'", ct.Ingress, []v3.Rule{{
		Action: v3.Allow, Protocol: ct.Proto("TCP"),
		Source:      v3.EntityRule{Selector: "app == 'client'", NamespaceSelector: "team == 'b'"},
		Destination: v3.EntityRule{Ports: ct.Ports("8080")},
	}}, nil)
	if _, err := c.Create(ctx, allow); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "allow on 8080 enforced", func() bool { return client.tcp(web, tcpPortA) })
	if client.tcp(web, tcpPortB) {
		t.Error("client->web:9090 allowed, want denied")
	}

	if _, err := c.Delete(ctx, datastore.KeyOf(deny), datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "9090 still denied by the remaining policy; 8080 allowed", func() bool {
		return client.tcp(web, tcpPortA) && !client.tcp(web, tcpPortB)
	})
}
