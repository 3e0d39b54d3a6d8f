//go:build privileged

package e2e

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// flushInterval is the collector's FlowLogsFlushInterval in the flow log
// tests: a flow must appear within two of them.
const flushInterval = time.Second

// TestPrivilegedFlowLogs programs a node with flow logs on (NFLOG verdict
// marks), runs the collector in its namespace, sends real connections
// that a policy allows, that a rule denies and that a tier's end denies,
// and checks that each appears in the flow log within two flush
// intervals naming the tier, policy and rule that decided it (with the
// Pass of an earlier tier on the path), that the connection's bytes come
// from conntrack, and that the rules' Prometheus counters grow.
func TestPrivilegedFlowLogs(t *testing.T) {
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	db := newPod(t, nodeNS, "db", "calibbbb", "10.65.0.2")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	fromClient := v3.EntityRule{Selector: "app == 'client'", NamespaceSelector: "projectcalico.org/name == 'dev'"}
	tcpRule := func(action v3.Action, ports ...string) v3.Rule {
		return v3.Rule{Action: action, Protocol: ct.Proto("TCP"), Source: fromClient, Destination: v3.EntityRule{Ports: ct.Ports(ports...)}}
	}
	objs := []any{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("prod", "db", node, db.iface, db.ip.String(), map[string]string{"app": "db"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
		ct.Tier("security", 100, v3.Deny),
		ct.GNP("security.pass-prod", "security", nil, "app in {'web', 'db'}", ct.Ingress, []v3.Rule{{Action: v3.Pass}}, nil),
		ct.NP("prod", "web", nil, "app == 'web'", ct.Ingress, []v3.Rule{
			tcpRule(v3.Deny, "9090"), tcpRule(v3.Allow, "8080")}, nil),
		ct.NP("prod", "db", nil, "app == 'db'", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Source: v3.EntityRule{Selector: "app == 'nobody'"}}}, nil),
	}
	res := calc.Compute(ct.Input(node, objs))
	if len(res.Problems) > 0 {
		t.Fatalf("calc problems: %v", res.Problems)
	}
	cfg := rules.DefaultConfig()
	cfg.FlowLogs = true
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dp := dataplane.New(dataplane.Config{Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}, V4: dataplane.BackendDefaultV4, Logger: log})
	dp.SetDesired(rules.Render(cfg, res, 4))
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatalf("applying: %v", err)
	}

	lookups := collector.NewLookups()
	var ups []datastore.Update
	for _, o := range objs {
		r := o.(v3.Resource)
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
	}
	lookups.OnUpdates(ups)
	reg := prometheus.NewRegistry()
	store := collector.NewStore(10000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- collector.Run(ctx, collector.Config{Node: node, NetnsPath: nodeNS.Path(), FlushInterval: flushInterval,
			Resolver: lookups, Counters: collector.NewRuleCounters(reg), Store: store, Log: log})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("collector: %v", err)
		}
	})
	time.Sleep(200 * time.Millisecond) // the NFLOG groups bound

	allowed := collector.PolicyHit{Kind: "np", Tier: "default", Namespace: "prod", Name: "web", Action: "Allow", RuleIndex: 1}
	denied := collector.PolicyHit{Kind: "np", Tier: "default", Namespace: "prod", Name: "web", Action: "Deny", RuleIndex: 0}
	endOfTier := collector.PolicyHit{Kind: "eot", Tier: "default", Action: "Deny", RuleIndex: -1}
	pass := collector.PolicyHit{Kind: "gnp", Tier: "security", Name: "security.pass-prod", Action: "Pass", RuleIndex: 0}
	for _, tc := range []struct {
		desc   string
		dial   func() bool
		want   bool
		dst    *pod
		port   uint16
		action string
		path   []collector.PolicyHit
	}{
		{"client->web:8080 allowed by prod/web rule 1", func() bool { return client.tcp(web, tcpPortA) }, true, web, tcpPortA, "Allow", []collector.PolicyHit{pass, allowed}},
		{"client->web:9090 denied by prod/web rule 0", func() bool { return client.tcp(web, tcpPortB) }, false, web, tcpPortB, "Deny", []collector.PolicyHit{pass, denied}},
		{"client->db:8080 denied at the end of tier default", func() bool { return client.tcp(db, tcpPortA) }, false, db, tcpPortA, "Deny", []collector.PolicyHit{pass, endOfTier}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := ruleCount(t, reg, "felix_policy_rule_packets_total", tc.path[1]) +
				ruleCount(t, reg, "felix_policy_rule_connections_total", tc.path[1])
			sent := time.Now()
			if got := tc.dial(); got != tc.want {
				t.Fatalf("connection: got %v, want %v", got, tc.want)
			}
			f := waitFlow(t, store, sent.Add(2*flushInterval+flushInterval/2), func(f *collector.Flow) bool {
				return f.Reporter == "Dst" && f.SourceIP == client.ip.String() && f.DestIP == tc.dst.ip.String() && f.DestPort == tc.port
			})
			t.Logf("flow after %v: %+v", time.Since(sent).Round(time.Millisecond), *f)
			if f.Action != tc.action || f.Proto != "tcp" || f.Source.Name != "client" || f.Source.Namespace != "dev" ||
				f.Dest.Name != tc.dst.name || f.Dest.Namespace != "prod" {
				t.Errorf("flow %+v: want %s from dev/client to prod/%s", f.FlowKey, tc.action, tc.dst.name)
			}
			if len(f.Enforced) != len(tc.path) {
				t.Fatalf("enforced %+v, want %+v", f.Enforced, tc.path)
			}
			for i, h := range f.Enforced {
				want := tc.path[i]
				want.Index = i
				if h != want {
					t.Errorf("hit %d: %+v, want %+v", i, h, want)
				}
			}
			if tc.action == "Deny" && (f.Packets == 0 || f.Bytes == 0) {
				t.Errorf("denied flow counts nothing: %+v", f)
			}
			if tc.action == "Allow" {
				if f.ConnectionsStarted != 1 {
					t.Errorf("connections started %d, want 1", f.ConnectionsStarted)
				}
				// The connection's bytes (SYN, answer, FIN...) come
				// from conntrack by the next flush.
				waitFlow(t, store, time.Now().Add(2*flushInterval+flushInterval/2), func(g *collector.Flow) bool {
					return g.FlowKey == f.FlowKey && g.Bytes > 0 && g.Packets >= 4
				})
			}
			after := ruleCount(t, reg, "felix_policy_rule_packets_total", tc.path[1]) +
				ruleCount(t, reg, "felix_policy_rule_connections_total", tc.path[1])
			if after <= before {
				t.Errorf("rule counters did not grow: %v -> %v", before, after)
			}
		})
	}
}

// waitFlow waits until the store holds a flow that match accepts.
func waitFlow(t *testing.T, store *collector.Store, deadline time.Time, match func(*collector.Flow) bool) *collector.Flow {
	t.Helper()
	for {
		flows, _, _ := store.Snapshot(false)
		for i := len(flows) - 1; i >= 0; i-- {
			if match(&flows[i]) {
				return &flows[i]
			}
		}
		if time.Now().After(deadline) {
			var seen []string
			for _, f := range flows {
				seen = append(seen, f.SourceIP+">"+f.DestIP+" "+f.Action+" "+f.Policies)
			}
			t.Fatalf("no such flow within the deadline; flows: %s", strings.Join(seen, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ruleCount reads a per-rule counter of the hit's rule from reg.
func ruleCount(t *testing.T, reg *prometheus.Registry, name string, h collector.PolicyHit) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tier": h.Tier, "policy": h.Name, "namespace": h.Namespace, "direction": "ingress",
		"rule_index": strconv.Itoa(h.RuleIndex), "action": h.Action}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
