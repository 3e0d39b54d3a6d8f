//go:build privileged

package e2e

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

const node = "node1"

type check struct {
	desc string
	got  func() bool
	want bool
}

// TestPrivilegedPolicyEnforcement wires a node and three pods (web and db
// in namespace prod, client in namespace dev), then for each policy case
// computes, renders and programs the node's filter table and asserts real
// connections succeed or fail.
func TestPrivilegedPolicyEnforcement(t *testing.T) { forEachMode(t, testPolicyEnforcement) }

func testPolicyEnforcement(t *testing.T, mode string) {
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	db := newPod(t, nodeNS, "db", "calibbbb", "10.65.0.2")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")

	webWEP := ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"})
	// The client runs as service account "tester"; its ksa. profile carries
	// the account's labels the way the Kubernetes datastore writes them.
	clientWEP := ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"})
	clientWEP.Spec.ServiceAccountName = "tester"
	clientWEP.Spec.Profiles = append(clientWEP.Spec.Profiles, "ksa.dev.tester")
	saProfile := &v3.Profile{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: "ksa.dev.tester"},
		Spec: v3.ProfileSpec{LabelsToApply: map[string]string{
			"pcsa.projectcalico.org/name": "tester", "pcsa.role": "tester"}},
	}
	webWEP.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: tcpPortA}}
	base := []any{
		ct.NSProfile("prod", map[string]string{"team": "a"}),
		ct.NSProfile("dev", map[string]string{"team": "b"}),
		webWEP,
		ct.WEP("prod", "db", node, db.iface, db.ip.String(), map[string]string{"app": "db"}),
		clientWEP, saProfile,
		// An endpoint on another node: only its labels and IP matter here.
		ct.WEP("dev", "far", "node2", "calizzzz", "10.65.9.9", map[string]string{"app": "client"}),
	}

	dp := newModeDataplane(t, mode, nodeNS.Path(), dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}, V4: dataplane.BackendDefaultV4,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	apply := func(t *testing.T, policies ...any) {
		t.Helper()
		res := calc.Compute(ct.Input(node, append(append([]any{}, base...), policies...)))
		if len(res.Problems) > 0 {
			t.Fatalf("calc problems: %v", res.Problems)
		}
		dp.SetDesired(rules.Render(rules.DefaultConfig(), res, 4))
		start := time.Now()
		if _, err := dp.Apply(context.Background()); err != nil {
			t.Fatalf("applying: %v", err)
		}
		t.Logf("applied in %v", time.Since(start))
	}
	tcpRule := func(action v3.Action, src v3.EntityRule, ports ...string) v3.Rule {
		return v3.Rule{Action: action, Protocol: ct.Proto("TCP"), Source: src, Destination: v3.EntityRule{Ports: ct.Ports(ports...)}}
	}
	fromClient := v3.EntityRule{Selector: "app == 'client'", NamespaceSelector: "team == 'b'"}
	// knp builds a policy the shape the Kubernetes datastore gives a
	// Kubernetes NetworkPolicy (knp.default.<name>, tier default, order
	// 1000, pods only).
	knp := func(ns, name, podSel string, types []v3.PolicyType, in, out []v3.Rule) *v3.NetworkPolicy {
		return ct.NP(ns, "knp.default."+name, ct.Ptr(1000.0), "("+podSel+") && projectcalico.org/orchestrator == 'k8s'", types, in, out)
	}

	cases := []struct {
		name     string
		policies []any
		checks   []check
	}{
		{
			name: "no policy: namespace profiles allow all",
			checks: []check{
				{"client->web tcp", func() bool { return client.tcp(web, tcpPortA) }, true},
				{"client->web udp", func() bool { return client.udp(web) }, true},
				{"web->db tcp", func() bool { return web.tcp(db, tcpPortB) }, true},
				{"client->web ping", func() bool { return client.ping(web, 1) }, true},
			},
		},
		{
			name: "default deny ingress in prod",
			policies: []any{
				ct.NP("prod", "default-deny", nil, "all()", ct.Ingress, nil, nil),
			},
			checks: []check{
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"client->web udp denied", func() bool { return client.udp(web) }, false},
				{"db->web tcp denied (same namespace)", func() bool { return db.tcp(web, tcpPortA) }, false},
				{"web->client tcp allowed (egress untouched, client not selected)", func() bool { return web.tcp(client, tcpPortA) }, true},
			},
		},
		{
			name: "default deny egress in dev",
			policies: []any{
				ct.NP("dev", "default-deny-egress", nil, "all()", ct.Egress, nil, nil),
			},
			checks: []check{
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"client->web udp denied", func() bool { return client.udp(web) }, false},
				{"web->client tcp allowed (replies are established)", func() bool { return web.tcp(client, tcpPortA) }, true},
			},
		},
		{
			name: "allow by podSelector + namespaceSelector on a named port",
			policies: []any{
				ct.NP("prod", "default-deny", nil, "all()", ct.Ingress, nil, nil),
				ct.NP("prod", "allow-client", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{tcpRule(v3.Allow, fromClient, "http")}, nil),
			},
			checks: []check{
				{"client->web:http allowed", func() bool { return client.tcp(web, tcpPortA) }, true},
				{"client->web:9090 denied", func() bool { return client.tcp(web, tcpPortB) }, false},
				{"db->web:http denied (wrong labels)", func() bool { return db.tcp(web, tcpPortA) }, false},
				{"client->db denied", func() bool { return client.tcp(db, tcpPortA) }, false},
				{"client->web udp denied", func() bool { return client.udp(web) }, false},
			},
		},
		{
			name: "two tiers: Pass defers to the default tier",
			policies: []any{
				ct.Tier("security", 100, v3.Deny),
				ct.GNP("security.pass-dev", "security", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Pass, Source: v3.EntityRule{NamespaceSelector: "team == 'b'"}}}, nil),
				ct.GNP("security.deny-rest", "security", ct.Ptr(20.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Deny}}, nil),
				ct.NP("prod", "allow-client", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{tcpRule(v3.Allow, fromClient, "8080")}, nil),
			},
			checks: []check{
				{"client->web:8080 passed then allowed", func() bool { return client.tcp(web, tcpPortA) }, true},
				{"client->web:9090 passed then dropped at the end of the default tier", func() bool { return client.tcp(web, tcpPortB) }, false},
				{"db->web:8080 denied in the security tier", func() bool { return db.tcp(web, tcpPortA) }, false},
			},
		},
		{
			name: "Deny before Allow by order",
			policies: []any{
				ct.GNP("deny-9090", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{tcpRule(v3.Deny, v3.EntityRule{}, "9090")}, nil),
				ct.GNP("allow-all", "default", ct.Ptr(20.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Allow}}, nil),
			},
			checks: []check{
				{"client->web:9090 denied", func() bool { return client.tcp(web, tcpPortB) }, false},
				{"client->web:8080 allowed", func() bool { return client.tcp(web, tcpPortA) }, true},
				{"client->web udp allowed", func() bool { return client.udp(web) }, true},
			},
		},
		{
			name: "Allow before Deny by order",
			policies: []any{
				ct.GNP("deny-9090", "default", ct.Ptr(30.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{tcpRule(v3.Deny, v3.EntityRule{}, "9090")}, nil),
				ct.GNP("allow-all", "default", ct.Ptr(20.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Allow}}, nil),
			},
			checks: []check{
				{"client->web:9090 allowed", func() bool { return client.tcp(web, tcpPortB) }, true},
			},
		},
		{
			name: "NetworkSet as a source",
			policies: []any{
				ct.NetSet("prod", "partners", map[string]string{"role": "partner"}, "10.65.0.3/32", "192.0.2.0/24"),
				ct.NP("prod", "allow-partners", nil, "app == 'web'", ct.Ingress,
					[]v3.Rule{tcpRule(v3.Allow, v3.EntityRule{Selector: "role == 'partner'"}, "8080")}, nil),
			},
			checks: []check{
				{"client (in the set) ->web allowed", func() bool { return client.tcp(web, tcpPortA) }, true},
				{"db (not in the set) ->web denied", func() bool { return db.tcp(web, tcpPortA) }, false},
			},
		},
		{
			name: "Kubernetes NetworkPolicy shape: ipBlock with except",
			policies: []any{
				knp("prod", "allow-block", "app == 'web'", ct.Ingress, []v3.Rule{{
					Action: v3.Allow, Protocol: ct.Proto("TCP"),
					Source:      v3.EntityRule{Nets: []string{"10.65.0.0/24"}, NotNets: []string{"10.65.0.2/32"}},
					Destination: v3.EntityRule{Ports: ct.Ports("8080")},
				}}, nil),
			},
			checks: []check{
				{"client (in the block) ->web allowed", func() bool { return client.tcp(web, tcpPortA) }, true},
				{"db (the exception) ->web denied", func() bool { return db.tcp(web, tcpPortA) }, false},
			},
		},
		{
			name: "Kubernetes NetworkPolicy shape: endPort range and default deny egress",
			policies: []any{
				knp("prod", "allow-range", "app == 'web'", ct.Ingress, []v3.Rule{{
					Action: v3.Allow, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Ports: ct.Ports("9000:9100")},
				}}, nil),
				knp("prod", "deny-egress", "app == 'db'", ct.Egress, nil, nil),
			},
			checks: []check{
				{"client->web:9090 (in range) allowed", func() bool { return client.tcp(web, tcpPortB) }, true},
				{"client->web:8080 (outside) denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"db->client denied (egress)", func() bool { return db.tcp(client, tcpPortA) }, false},
				{"client->db allowed (db's ingress untouched)", func() bool { return client.tcp(db, tcpPortA) }, true},
			},
		},
		{
			name: "service-account selector",
			policies: []any{
				ct.GNP("from-testers", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{{
					Action: v3.Allow, Source: v3.EntityRule{ServiceAccounts: &v3.ServiceAccountMatch{Selector: "role == 'tester'"}},
				}}, nil),
			},
			checks: []check{
				{"client (sa tester) ->web allowed", func() bool { return client.tcp(web, tcpPortA) }, true},
				{"db (no sa) ->web denied", func() bool { return db.tcp(web, tcpPortA) }, false},
			},
		},
		{
			name: "ICMP allowed while TCP denied",
			policies: []any{
				ct.NP("prod", "icmp-only", nil, "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("ICMP"), ICMP: &v3.ICMPFields{Type: ct.Ptr(8)}}}, nil),
			},
			checks: []check{
				{"client->web ping allowed", func() bool { return client.ping(web, 2) }, true},
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"client->web udp denied", func() bool { return client.udp(web) }, false},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			apply(t, tc.policies...)
			for _, c := range tc.checks {
				if got := c.got(); got != c.want {
					t.Errorf("%s: connected=%v, want %v", c.desc, got, c.want)
				}
			}
		})
	}
	t.Run("removing all policy restores connectivity and leaves no stale chains", func(t *testing.T) {
		apply(t)
		if !client.tcp(web, tcpPortB) || !client.udp(web) {
			t.Error("connectivity not restored")
		}
		r := dataplane.ExecRunner{NetnsPath: nodeNS.Path()}
		if mode == "nftables" {
			ruleset, err := r.Run(context.Background(), "nft", []string{"list", "ruleset"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(ruleset); !strings.Contains(s, "chain filter-cali-FORWARD") || strings.Contains(s, "chain filter-cali-pi-") ||
				strings.Contains(s, "chain filter-cali-po-") || strings.Contains(s, "set cali40s-") {
				t.Errorf("stale policy chains or sets left, or felix's chains missing:\n%s", s)
			}
		}
		save, err := r.Run(context.Background(), "iptables-save", []string{"-t", "filter"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(save); strings.Contains(s, ":cali-pi-") || strings.Contains(s, ":cali-po-") {
			t.Errorf("stale policy chains left:\n%s", s)
		}
		sets, err := r.Run(context.Background(), "ipset", []string{"list", "-n"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(sets)) != "" {
			t.Errorf("stale ipsets left: %s", sets)
		}
	})
}
