//go:build privileged

package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestPrivilegedUnrenderableRulesFailClosed proves with real traffic that a
// policy whose rule felix cannot render (a services match where felix
// does not follow Services, as on the etcd datastore: valid Calico,
// refused by etcd's writes, but it can still reach felix) is not skipped:
// a Deny with it still blocks (widened to the rule's other matches), a
// Pass with it denies what reaches it, an Allow with it allows nothing;
// nor is a policy that fails validation.
func TestPrivilegedUnrenderableRulesFailClosed(t *testing.T) {
	forEachMode(t, testUnrenderableRulesFailClosed)
}

func testUnrenderableRulesFailClosed(t *testing.T, mode string) {
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	base := []any{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
	}
	dp := newModeDataplane(t, mode, nodeNS.Path(), dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}, V4: dataplane.BackendDefaultV4,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	apply := func(t *testing.T, policies ...any) *calc.Result {
		t.Helper()
		res := calc.Compute(ct.Input(node, append(append([]any{}, base...), policies...)))
		dp.SetDesired(rules.Render(rules.DefaultConfig(), res, 4))
		if _, err := dp.Apply(context.Background()); err != nil {
			t.Fatalf("applying: %v", err)
		}
		return res
	}
	fromSvc := v3.EntityRule{Services: &v3.ServiceMatch{Name: "api", Namespace: "dev"}}
	toSvc := v3.EntityRule{Services: &v3.ServiceMatch{Name: "web", Namespace: "prod"}}
	allowAll := ct.GNP("allow-all", "default", ct.Ptr(100.0), "all()", ct.Both,
		[]v3.Rule{{Action: v3.Allow}}, []v3.Rule{{Action: v3.Allow}})

	cases := []struct {
		name     string
		policies []any
		checks   []check
	}{
		{
			name: "ingress Deny TCP from a service: widened to all TCP",
			policies: []any{allowAll,
				ct.GNP("deny-svc", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Deny, Protocol: ct.Proto("TCP"), Source: fromSvc}}, nil)},
			checks: []check{
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"client->web udp allowed (not TCP)", func() bool { return client.udp(web) }, true},
			},
		},
		{
			name: "egress Deny TCP to a service: widened to all TCP",
			policies: []any{allowAll,
				ct.NP("dev", "deny-to-svc", ct.Ptr(10.0), "all()", ct.Egress, nil,
					[]v3.Rule{{Action: v3.Deny, Protocol: ct.Proto("TCP"), Destination: toSvc}})},
			checks: []check{
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"client->web udp allowed (not TCP)", func() bool { return client.udp(web) }, true},
				{"web->client tcp allowed (web not selected)", func() bool { return web.tcp(client, tcpPortA) }, true},
			},
		},
		{
			name: "Pass from a service: denies what reaches it",
			policies: []any{allowAll,
				ct.Tier("security", 10, v3.Deny),
				ct.GNP("security.pass-svc", "security", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Pass, Source: fromSvc}}, nil)},
			checks: []check{
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"client->web udp denied", func() bool { return client.udp(web) }, false},
			},
		},
		{
			// Stored past the API's validation (an upside-down port
			// range): Calico's felix skips such a policy, letting the
			// TCP it denies through; Tabby denies all its direction's
			// traffic of what it selects.
			name: "invalid Deny policy: denies all ingress of what it selects",
			policies: []any{allowAll,
				ct.GNP("deny-invalid", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Deny, Protocol: ct.Proto("TCP"),
						Destination: v3.EntityRule{Ports: []numorstring.Port{{MinPort: 90, MaxPort: 80}}}}}, nil)},
			checks: []check{
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
				{"client->web udp denied", func() bool { return client.udp(web) }, false},
				{"web->client tcp allowed (egress not in its types)", func() bool { return web.tcp(client, tcpPortA) }, true},
			},
		},
		{
			name: "Allow from a service: dropped",
			policies: []any{
				ct.NP("prod", "allow-svc", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
					[]v3.Rule{{Action: v3.Allow, Source: fromSvc}}, nil)},
			checks: []check{
				{"client->web tcp denied", func() bool { return client.tcp(web, tcpPortA) }, false},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := apply(t, tc.policies...)
			for _, c := range tc.checks {
				if got := c.got(); got != c.want {
					t.Errorf("%s: connected=%v, want %v", c.desc, got, c.want)
				}
			}
			if len(res.Unrenderable) != 1 {
				t.Errorf("unrenderable = %v, want the one rule", res.Unrenderable)
			}
		})
	}
}
