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

// TestPrivilegedDaemonZeroNetworkSet replays issue 35's first finding
// through the whole felix pipeline over a real etcd: a GlobalNetworkSet
// holding 0.0.0.0/0 selected by a Deny is enforced and felix stays in
// sync; the set's later edits (the renderer's member changes) and an
// unrelated policy on another pod are programmed too.
func TestPrivilegedDaemonZeroNetworkSet(t *testing.T) { forEachMode(t, testDaemonZeroNetworkSet) }

func testDaemonZeroNetworkSet(t *testing.T, mode string) {
	e := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()

	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	db := newPod(t, nodeNS, "db", "calibbbb", "10.65.0.2")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	gns := ct.GlobalNetSet("everyone", map[string]string{"list": "deny"}, "0.0.0.0/0")
	for _, r := range []v3.Resource{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("prod", "db", node, db.iface, db.ip.String(), map[string]string{"app": "db"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
		gns,
		ct.GNP("deny-listed", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
			{Action: v3.Deny, Source: v3.EntityRule{Selector: "list == 'deny'"}},
			{Action: v3.Allow},
		}, nil),
	} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	dp := runDaemonMode(t, c, nodeNS, nil, mode)
	eventually(t, 10*time.Second, "in sync with the /0 deny enforced, db reachable", func() bool {
		return dp.InSync() && !client.tcp(web, tcpPortA) && !db.tcp(web, tcpPortA) && client.tcp(db, tcpPortA)
	})

	// An unrelated policy on db is programmed.
	if _, err := c.Create(ctx, ct.GNP("db-deny", "default", ct.Ptr(20.0), "app == 'db'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "db's default deny enforced", func() bool { return dp.InSync() && !client.tcp(db, tcpPortA) })

	// The set edited: the /0 replaced by the client's address alone.
	got, err := c.Get(ctx, datastore.KeyOf(gns))
	if err != nil {
		t.Fatal(err)
	}
	edited := got.(*v3.GlobalNetworkSet).DeepCopy()
	edited.Spec.Nets = []string{"10.65.0.3/32"}
	updated, err := c.Update(ctx, edited)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "only the client denied now", func() bool {
		return dp.InSync() && db.tcp(web, tcpPortA) && !client.tcp(web, tcpPortA)
	})
	// And back to the whole space.
	edited = updated.(*v3.GlobalNetworkSet).DeepCopy()
	edited.Spec.Nets = []string{"10.65.0.3/32", "0.0.0.0/0"}
	if _, err := c.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "everyone denied again", func() bool {
		return dp.InSync() && !db.tcp(web, tcpPortA) && !client.tcp(web, tcpPortA)
	})
}
