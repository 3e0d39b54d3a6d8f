//go:build privileged

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestPrivilegedZeroNetworkDeny proves with real TCP connections that a
// Deny whose source is the whole IPv4 space through an ipset is enforced
// (the kernel's hash:net sets refuse 0.0.0.0/0; felix writes it as
// 0.0.0.0/1 and 128.0.0.0/1, as Calico does): through a
// GlobalNetworkSet, a namespaced NetworkSet and a rule's nets list of
// more than one CIDR, each denying web's port A while its port B and the
// other pods stay reachable.
func TestPrivilegedZeroNetworkDeny(t *testing.T) { forEachMode(t, testZeroNetworkDeny) }

func testZeroNetworkDeny(t *testing.T, mode string) {
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	db := newPod(t, nodeNS, "db", "calibbbb", "10.65.0.2")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	base := []any{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("prod", "db", node, db.iface, db.ip.String(), map[string]string{"app": "db"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
		ct.GlobalNetSet("everyone", map[string]string{"gset": "all"}, "0.0.0.0/0"),
		ct.NetSet("prod", "everyone-ns", map[string]string{"nset": "all"}, "0.0.0.0/0", "10.1.0.0/16"),
	}
	dp := newModeDataplane(t, mode, nodeNS.Path(), dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}, V4: dataplane.BackendDefaultV4,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	denyPortA := func(src v3.EntityRule) any {
		return ct.GNP("deny-everyone", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
			{Action: v3.Deny, Protocol: ct.Proto("TCP"), Source: src, Destination: v3.EntityRule{Ports: ct.Ports(fmt.Sprint(tcpPortA))}},
			{Action: v3.Allow},
		}, nil)
	}
	for _, tc := range []struct {
		name string
		src  v3.EntityRule
	}{
		{"GlobalNetworkSet", v3.EntityRule{Selector: "gset == 'all'"}},
		{"NetworkSet", v3.EntityRule{Selector: "nset == 'all'"}},
		{"rule nets", v3.EntityRule{Nets: []string{"0.0.0.0/0", "10.1.0.0/16"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := calc.Compute(ct.Input(node, append(append([]any{}, base...), denyPortA(tc.src))))
			rs := rules.Render(rules.DefaultConfig(), res, 4)
			if !usesZeroSet(rs) {
				t.Fatal("no ipset holds 0.0.0.0/0: the case does not test what it says")
			}
			dp.SetDesired(rs)
			if _, err := dp.Apply(context.Background()); err != nil {
				t.Fatalf("applying: %v", err)
			}
			for _, c := range []check{
				{"client->web:A denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"db->web:A denied", func() bool { return db.tcp(web, tcpPortA) }, false},
				{"client->web:B allowed", func() bool { return client.tcp(web, tcpPortB) }, true},
				{"client->db:A allowed", func() bool { return client.tcp(db, tcpPortA) }, true},
			} {
				if got := c.got(); got != c.want {
					t.Errorf("%s: connected=%v, want %v", c.desc, got, c.want)
				}
			}
		})
	}
}

// usesZeroSet says whether an ipset of rs holds a /0.
func usesZeroSet(rs *rules.Ruleset) bool {
	for _, s := range rs.IPSets {
		if s.Members.Has("0.0.0.0/0") || s.Members.Has("::/0") {
			return true
		}
	}
	return false
}

// TestPrivilegedZeroNetworkDenyIPv6: the same with ::/0 (written as ::/1
// and 8000::/1) over ip6tables and inet6 sets, through a
// GlobalNetworkSet and a rule's nets list.
func TestPrivilegedZeroNetworkDenyIPv6(t *testing.T) { forEachMode(t, testZeroNetworkDenyIPv6) }

func testZeroNetworkDenyIPv6(t *testing.T, mode string) {
	nodeNS := newNode(t)
	if err := nodeNS.Do(func(ns.NetNS) error { return writeSysctl("net/ipv6/conf/all/forwarding", "1") }); err != nil {
		t.Fatal(err)
	}
	webNS, webIP := newPod6(t, nodeNS, "cali6aaa", "fd00:65::1")
	clientNS, _ := newPod6(t, nodeNS, "cali6ccc", "fd00:65::3")
	listen6(t, webNS, tcpPortA)
	listen6(t, webNS, tcpPortB)
	web := ct.WEP("prod", "web6", node, "cali6aaa", "", map[string]string{"app": "web"})
	web.Spec.IPNetworks = []string{webIP.String() + "/128"}
	client := ct.WEP("dev", "client6", node, "cali6ccc", "", map[string]string{"app": "client"})
	client.Spec.IPNetworks = []string{"fd00:65::3/128"}
	base := []any{ct.NSProfile("prod", nil), ct.NSProfile("dev", nil), web, client,
		ct.GlobalNetSet("everyone6", map[string]string{"gset": "all"}, "::/0")}
	dp := newModeDataplane(t, mode, nodeNS.Path(), dataplane.Config{Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()},
		V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	for _, tc := range []struct {
		name string
		src  v3.EntityRule
	}{
		{"GlobalNetworkSet", v3.EntityRule{Selector: "gset == 'all'"}},
		{"rule nets", v3.EntityRule{Nets: []string{"::/0", "fd00:1::/64"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := ct.GNP("deny-everyone6", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
				{Action: v3.Deny, Protocol: ct.Proto("TCP"), Source: tc.src, Destination: v3.EntityRule{Ports: ct.Ports(fmt.Sprint(tcpPortA))}},
				{Action: v3.Allow},
			}, nil)
			res := calc.Compute(ct.Input(node, append(append([]any{}, base...), pol)))
			v6 := rules.Render(rules.DefaultConfig(), res, 6)
			if !usesZeroSet(v6) {
				t.Fatal("no ipset holds ::/0: the case does not test what it says")
			}
			dp.SetDesired(rules.Render(rules.DefaultConfig(), res, 4), v6)
			if _, err := dp.Apply(context.Background()); err != nil {
				t.Fatalf("applying: %v", err)
			}
			if dial6(clientNS, webIP, tcpPortA) {
				t.Error("client->web:A over IPv6 allowed, want denied")
			}
			if !dial6(clientNS, webIP, tcpPortB) {
				t.Error("client->web:B over IPv6 denied, want allowed")
			}
		})
	}
}

// faultyRunner is the real runner, except that every write of set bad
// fails without reaching the kernel (a set the kernel refuses): an
// `ipset restore` naming it, and an in-process member update or fill of
// it.
type faultyRunner struct {
	real dataplane.ExecRunner
	bad  string
	on   bool
	// badRule, when set, makes every iptables-restore adding a rule
	// with this text fail (a rule the kernel refuses).
	badRule string
}

func (r *faultyRunner) fault() error {
	return errors.New("injected fault: set " + r.bad + " cannot be programmed")
}

func (r *faultyRunner) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	if r.on && name == "ipset" && bytes.Contains(stdin, []byte(" "+r.bad+" ")) {
		return nil, r.fault()
	}
	if r.badRule != "" && strings.HasSuffix(name, "-restore") && bytes.Contains(stdin, []byte(r.badRule)) {
		return nil, errors.New("iptables-restore: injected fault: line with " + r.badRule + " refused")
	}
	return r.real.Run(ctx, name, args, stdin)
}

func (r *faultyRunner) touches(us []dataplane.IPSetMemberUpdate) bool {
	return r.on && slices.ContainsFunc(us, func(u dataplane.IPSetMemberUpdate) bool { return u.Set == r.bad })
}

func (r *faultyRunner) UpdateIPSetMembers(ctx context.Context, us []dataplane.IPSetMemberUpdate) error {
	if r.touches(us) {
		return r.fault()
	}
	return r.real.UpdateIPSetMembers(ctx, us)
}

func (r *faultyRunner) FillIPSets(ctx context.Context, us []dataplane.IPSetMemberUpdate) error {
	if r.touches(us) {
		return r.fault()
	}
	return r.real.FillIPSets(ctx, us)
}

// TestPrivilegedUnprogrammableSetIsolated proves with real packets that a
// set felix cannot program (a fault injected for its name) neither stops
// an unrelated policy change on the node nor opens the policy that uses
// it: db's new default deny is enforced, and web, whose policy denies
// the GlobalNetworkSet's sources, drops every source while the set is
// unprogrammable (fail closed), then is back to denying only the set's
// sources once it can be programmed.
func TestPrivilegedUnprogrammableSetIsolated(t *testing.T) {
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	db := newPod(t, nodeNS, "db", "calibbbb", "10.65.0.2")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	blocked := func(nets ...string) any {
		return ct.GlobalNetSet("blocked", map[string]string{"list": "blocked"}, nets...)
	}
	objs := func(extra ...any) []any {
		return append([]any{
			ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
			ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
			ct.WEP("prod", "db", node, db.iface, db.ip.String(), map[string]string{"app": "db"}),
			ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
			ct.GNP("web-deny-blocked", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
				{Action: v3.Deny, Source: v3.EntityRule{Selector: "list == 'blocked'"}},
				{Action: v3.Allow},
			}, nil),
		}, extra...)
	}
	r := &faultyRunner{real: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}}
	dp := dataplane.New(dataplane.Config{Runner: r, V4: dataplane.BackendDefaultV4,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	render := func(objs []any) *rules.Ruleset {
		return rules.Render(rules.DefaultConfig(), calc.Compute(ct.Input(node, objs)), 4)
	}
	expect := func(t *testing.T, checks ...check) {
		t.Helper()
		for _, c := range checks {
			if got := c.got(); got != c.want {
				t.Errorf("%s: connected=%v, want %v", c.desc, got, c.want)
			}
		}
	}

	first := render(objs(blocked("10.65.0.3/32", "10.99.0.0/16")))
	dp.SetDesired(first)
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	expect(t,
		check{"client->web denied (blocked)", func() bool { return client.tcp(web, tcpPortA) }, false},
		check{"db->web allowed", func() bool { return db.tcp(web, tcpPortA) }, true},
		check{"client->db allowed", func() bool { return client.tcp(db, tcpPortA) }, true})

	// The set changes while the kernel refuses it; db gets a default
	// deny in the same update.
	r.bad, r.on = setOf(t, first), true
	dp.SetDesired(render(objs(blocked("10.65.0.3/32", "10.98.0.0/16"),
		ct.GNP("db-deny-all", "default", ct.Ptr(20.0), "app == 'db'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil))))
	_, err := dp.Apply(context.Background())
	if !errors.Is(err, dataplane.ErrUnprogrammed) || !strings.Contains(err.Error(), r.bad) {
		t.Fatalf("apply with the fault: %v; want ErrUnprogrammed naming %s", err, r.bad)
	}
	if ok, why := dp.Ready(); ok || !strings.Contains(why, r.bad) {
		t.Errorf("Ready() = %v, %q; want it to name %s", ok, why, r.bad)
	}
	expect(t,
		check{"client->db denied (the unrelated change is programmed)", func() bool { return client.tcp(db, tcpPortA) }, false},
		check{"db->web denied (web's policy fails closed)", func() bool { return db.tcp(web, tcpPortA) }, false},
		check{"client->web denied", func() bool { return client.tcp(web, tcpPortA) }, false},
		check{"web->client allowed (web's egress untouched)", func() bool { return web.tcp(client, tcpPortA) }, true})

	// The fault gone, the retry (once due) programs the set.
	r.on = false
	time.Sleep(100 * time.Millisecond)
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatalf("retry: %v", err)
	}
	expect(t,
		check{"db->web allowed again", func() bool { return db.tcp(web, tcpPortA) }, true},
		check{"client->web denied (blocked)", func() bool { return client.tcp(web, tcpPortA) }, false},
		check{"client->db denied", func() bool { return client.tcp(db, tcpPortA) }, false})
}

// setOf is the kernel name of the first ipset rs's chains match.
func setOf(t *testing.T, rs *rules.Ruleset) string {
	t.Helper()
	for _, c := range rs.Chains {
		for _, r := range c.Rules {
			if i := strings.Index(r.Match, "--match-set "); i >= 0 {
				return strings.Fields(r.Match[i:])[1]
			}
		}
	}
	t.Fatal("no chain matches an ipset")
	return ""
}

// TestPrivilegedUnprogrammableChainIsolated: a chain the kernel refuses
// (a fault injected for one of its rules) is replaced by a chain that
// drops everything, so web, whose policy it is, fails closed, while the
// rest of the same update (db's new default deny) is programmed; once the
// kernel takes the rule, the retry restores the policy.
func TestPrivilegedUnprogrammableChainIsolated(t *testing.T) {
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	db := newPod(t, nodeNS, "db", "calibbbb", "10.65.0.2")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	base := []any{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("prod", "db", node, db.iface, db.ip.String(), map[string]string{"app": "db"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
	}
	r := &faultyRunner{real: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}}
	dp := dataplane.New(dataplane.Config{Runner: r, V4: dataplane.BackendDefaultV4,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	webPolicy := ct.GNP("web-deny-port-a", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
		{Action: v3.Deny, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Ports: ct.Ports(fmt.Sprint(tcpPortA))}},
		{Action: v3.Allow},
	}, nil)
	dbDeny := ct.GNP("db-deny-all", "default", ct.Ptr(20.0), "app == 'db'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)
	rs := rules.Render(rules.DefaultConfig(), calc.Compute(ct.Input(node, append(append([]any{}, base...), webPolicy, dbDeny))), 4)
	chain := rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Name: "web-deny-port-a"})
	for _, c := range rs.Chains {
		if c.Name == chain {
			r.badRule = "cali:" + c.Hashed()[0].Hash
		}
	}
	if r.badRule == "" {
		t.Fatalf("no chain %s", chain)
	}
	dp.SetDesired(rs)
	_, err := dp.Apply(context.Background())
	if !errors.Is(err, dataplane.ErrUnprogrammed) || !strings.Contains(err.Error(), chain) {
		t.Fatalf("apply with the fault: %v; want ErrUnprogrammed naming %s", err, chain)
	}
	if ok, why := dp.Ready(); ok || !strings.Contains(why, chain) {
		t.Errorf("Ready() = %v, %q; want it to name %s", ok, why, chain)
	}
	for _, c := range []check{
		{"client->db denied (the rest of the update is programmed)", func() bool { return client.tcp(db, tcpPortA) }, false},
		{"client->web:B denied (web's policy chain drops all)", func() bool { return client.tcp(web, tcpPortB) }, false},
		{"client->web:A denied", func() bool { return client.tcp(web, tcpPortA) }, false},
		{"web->client allowed (web's egress untouched)", func() bool { return web.tcp(client, tcpPortA) }, true},
	} {
		if got := c.got(); got != c.want {
			t.Errorf("%s: connected=%v, want %v", c.desc, got, c.want)
		}
	}
	r.badRule = ""
	time.Sleep(100 * time.Millisecond)
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatalf("retry: %v", err)
	}
	for _, c := range []check{
		{"client->web:B allowed again", func() bool { return client.tcp(web, tcpPortB) }, true},
		{"client->web:A denied", func() bool { return client.tcp(web, tcpPortA) }, false},
		{"client->db denied", func() bool { return client.tcp(db, tcpPortA) }, false},
	} {
		if got := c.got(); got != c.want {
			t.Errorf("after the retry: %s: connected=%v, want %v", c.desc, got, c.want)
		}
	}
}
