package commands

import (
	"bytes"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// traceScenario is the story: dev/tester -> shop/backend tcp/8080
// denied at the end of the default tier, with a security tier passing
// cluster traffic, a network set of partners, a named port and a staged
// policy that would let the tester in.
func traceScenario() *policySnapshot {
	tcp := ct.Proto("TCP")
	backend := ct.WEP("shop", "backend", "node2", "calib4ck3nd", "10.65.1.1", map[string]string{"app": "backend"})
	backend.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http-alt", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080}}
	partners := ct.GlobalNetSet("partners", map[string]string{"role": "partner"}, "192.0.2.0/24")
	s := &policySnapshot{endpointToHost: "Drop"}
	for _, o := range []v3.Resource{
		ct.NSProfile("dev", map[string]string{"team": "dev"}),
		ct.NSProfile("shop", map[string]string{"team": "shop"}),
		ct.WEP("dev", "tester", "node1", "cali7e57e4", "10.65.0.3", map[string]string{"app": "tester"}),
		ct.WEP("shop", "frontend", "node1", "calif40n7", "10.65.0.4", map[string]string{"app": "frontend"}),
		backend, partners,
		ct.Tier("security", 100, v3.Deny),
		ct.GNP("pass-cluster", "security", ct.Ptr(10.0), "all()", ct.Both,
			[]v3.Rule{{Action: v3.Pass, Source: v3.EntityRule{Nets: []string{"10.65.0.0/16"}}},
				{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Selector: "role == 'partner'"}, Destination: v3.EntityRule{Ports: ct.Ports("443")}}},
			[]v3.Rule{{Action: v3.Pass}}),
		ct.NP("shop", "backend-allow", ct.Ptr(100.0), "app == 'backend'", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Selector: "app == 'frontend'"}, Destination: v3.EntityRule{Ports: ct.Ports("http-alt")}},
		}, nil),
		&v3.StagedNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "backend-allow-dev"},
			Spec: v3.StagedNetworkPolicySpec{StagedAction: v3.StagedActionSet, Tier: "default", Order: ct.Ptr(50.0), Selector: "app == 'backend'",
				Types: ct.Ingress, Ingress: []v3.Rule{{Action: v3.Allow, Protocol: tcp,
					Source: v3.EntityRule{NamespaceSelector: "team == 'dev'"}, Destination: v3.EntityRule{Ports: ct.Ports("8080")}}}}},
	} {
		s.add(o)
	}
	return s
}

func TestPolicyTraceGolden(t *testing.T) {
	cases := []struct {
		name, from, to, port, output string
	}{
		{"policy-trace-denied", "dev/tester", "shop/backend", "tcp/8080", ""},
		{"policy-trace-denied-yaml", "dev/tester", "shop/backend", "tcp/8080", "yaml"},
		{"policy-trace-denied-json", "dev/tester", "shop/backend", "tcp/8080", "json"},
		{"policy-trace-named-port", "shop/frontend", "10.65.1.1", "tcp/8080", ""},
		{"policy-trace-partner", "192.0.2.7", "shop/backend", "tcp/443", ""},
		{"policy-trace-outside", "198.51.100.1", "shop/backend", "tcp/443", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pkt, err := parsePort(tc.port, 0)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := traceFlow(traceScenario(), tc.from, tc.to, pkt)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := writePolicyOutput(&b, tc.output, rep, func(w io.Writer) { printTrace(w, rep) }); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.name, b.String())
		})
	}
}

func TestPolicyTraceVerdicts(t *testing.T) {
	cases := []struct {
		from, to, port string
		want, pending  string
	}{
		{"dev/tester", "shop/backend", "tcp/8080", "Deny", "Allow"},
		{"shop/frontend", "shop/backend", "tcp/8080", "Allow", "Allow"},
		{"shop/frontend", "shop/backend", "tcp/8081", "Deny", "Deny"},
		{"shop/frontend", "shop/backend", "udp/8080", "Deny", "Deny"},
		{"192.0.2.7", "shop/backend", "tcp/443", "Allow", "Allow"},
		{"198.51.100.1", "shop/backend", "tcp/443", "Deny", "Deny"},
		{"shop/backend", "dev/tester", "tcp/80", "Allow", "Allow"},
		{"dev/tester", "198.51.100.1", "icmp", "Allow", "Allow"},
	}
	for _, tc := range cases {
		pkt, err := parsePort(tc.port, 0)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := traceFlow(traceScenario(), tc.from, tc.to, pkt)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict != tc.want || rep.PendingVerdict != tc.pending {
			t.Errorf("%s -> %s %s: verdict %s pending %s, want %s pending %s", tc.from, tc.to, tc.port, rep.Verdict, rep.PendingVerdict, tc.want, tc.pending)
		}
	}
}

func TestPolicyShowAndChainGolden(t *testing.T) {
	s := traceScenario()
	ep, err := showEndpoint(s, "shop/backend")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printShow(&b, ep)
	for _, chain := range []string{ep.Lists[0].Tiers[0].Policies[0].Chain, ep.Lists[0].Tiers[1].Policies[0].Chain, "cali-pri-kns.shop", "cali-tw-calib4ck3nd"} {
		owners, err := chainOwners(s, chain)
		if err != nil {
			t.Fatal(err)
		}
		if err := writePolicyOutput(&b, "", owners, func(w io.Writer) {
			for _, o := range owners {
				w.Write([]byte(o.Chain + ": " + o.Direction + " of " + o.Kind + " " + o.Namespace + "/" + o.Name + "\n"))
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	checkGolden(t, "policy-show", b.String())
	if _, err := chainOwners(s, "cali-pi-nothing"); err == nil || !strings.Contains(err.Error(), "no policy") {
		t.Errorf("unknown chain: err %v", err)
	}
}

func TestParsePort(t *testing.T) {
	for _, bad := range []string{"tcp", "tcp/0", "tcp/x", "icmp/1/2/3", "bogus/1", "47/1"} {
		if _, err := parsePort(bad, 0); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	p, err := parsePort("icmp/3/1", 0)
	if err != nil || p.Protocol != 1 || p.ICMPType != 3 || p.ICMPCode != 1 {
		t.Errorf("icmp/3/1: %+v %v", p, err)
	}
}
