package calctest

import (
	"slices"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Node is the local node of Scenario.
const Node = "node1"

// Scenario is a small cluster exercising tiers, Pass, ordering, namespace
// and service-account scoping, named ports, network sets, ICMP, multi-CIDR
// nets, port ranges, and three kinds of bad input (an invalid selector, a
// missing tier, a bad port range), each of which must be skipped.
func Scenario() []any {
	return slices.Concat(scenarioItems(), scenarioPolicies(), scenarioHosts(), scenarioBadInput())
}

// scenarioItems are the Scenario's profiles, tiers, endpoints and network
// sets.
func scenarioItems() []any {
	return []any{
		NSProfile("prod", map[string]string{"team": "a"}),
		NSProfile("dev", map[string]string{"team": "b"}),
		Tier("security", 100, v3.Deny),
		Tier("platform", 200, v3.Pass),

		withPorts(WEP("prod", "web", Node, "cali1111", "10.65.0.1", map[string]string{"app": "web"}),
			v3.WorkloadEndpointPort{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080}),
		WEP("prod", "db", Node, "cali2222", "10.65.0.2", map[string]string{"app": "db"}),
		withSA(WEP("dev", "client", Node, "cali3333", "10.65.0.3", map[string]string{"app": "client"}), "tester"),
		withPorts(WEP("prod", "web2", "node2", "cali9999", "10.65.1.1", map[string]string{"app": "web"}),
			v3.WorkloadEndpointPort{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8081}),
		NetSet("prod", "partners", map[string]string{"role": "partner"}, "192.0.2.0/24", "198.51.100.7/32"),
		GlobalNetSet("blocked", map[string]string{"role": "blocked"}, "203.0.113.0/24", "2001:db8::/32"),
	}
}

// scenarioPolicies are the Scenario's workload policies, in three tiers.
func scenarioPolicies() []any {
	return []any{
		// security tier: deny blocked sources first, then pass everything
		// for prod to the next tiers.
		GNP("security.deny-blocked", "security", Ptr(10.0), "all()", Ingress,
			[]v3.Rule{{Action: v3.Deny, Source: v3.EntityRule{Selector: "role == 'blocked'"}}}, nil),
		GNP("security.pass-prod", "security", Ptr(20.0), "projectcalico.org/namespace == 'prod'", Ingress,
			[]v3.Rule{{Action: v3.Pass}}, nil),
		// platform tier (default Pass): log ICMP echo; no verdict.
		GNP("platform.log-icmp", "platform", nil, "app == 'db'", Ingress,
			[]v3.Rule{{Action: v3.Log, Protocol: Proto("ICMP"), ICMP: &v3.ICMPFields{Type: Ptr(8)}}}, nil),

		// default tier.
		NP("prod", "web-from-dev", Ptr(100.0), "app == 'web'", Ingress, []v3.Rule{{
			Action: v3.Allow, Protocol: Proto("TCP"),
			Source:      v3.EntityRule{Selector: "app == 'client'", NamespaceSelector: "team == 'b'"},
			Destination: v3.EntityRule{Ports: Ports("http", "9000:9100")},
		}}, nil),
		NP("prod", "web-from-partners", Ptr(200.0), "app == 'web'", Ingress, []v3.Rule{{
			Action: v3.Allow, Protocol: Proto("TCP"),
			Source:      v3.EntityRule{Selector: "role == 'partner'", NotNets: []string{"192.0.2.128/25"}},
			Destination: v3.EntityRule{NotPorts: Ports("22")},
		}}, nil),
		NP("prod", "db-from-sa", nil, "app == 'db'", Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: Proto("ICMP")},
			{Action: v3.Allow, Protocol: Proto("TCP"), Source: v3.EntityRule{
				NamespaceSelector: "all()", ServiceAccounts: &v3.ServiceAccountMatch{Names: []string{"tester"}}},
				Destination: v3.EntityRule{Ports: Ports("5432")}},
		}, nil),
		NP("dev", "client-egress", nil, "", Egress, nil, []v3.Rule{
			{Action: v3.Deny, Protocol: Proto("UDP"), Destination: v3.EntityRule{Nets: []string{"10.96.0.0/12", "172.16.0.0/12"}}},
			{Action: v3.Allow},
		}),
		// Not active: selects nothing on this node.
		NP("prod", "remote-only", nil, "app == 'nothing'", Ingress, []v3.Rule{{Action: v3.Allow}}, nil),
	}
}

// scenarioHosts are the Scenario's host endpoints and their policies.
func scenarioHosts() []any {
	return []any{
		// Host endpoints: a local one with a policy opening the kubelet
		// port, a remote one that only contributes to a selector set.
		HEP("node1-eth0", Node, "eth0", map[string]string{"role": "node"}, "192.168.0.10"),
		HEP("node2-eth0", "node2", "eth0", map[string]string{"role": "node"}, "192.168.0.11"),
		GNP("allow-kubelet", "default", Ptr(50.0), "role == 'node'", Ingress, []v3.Rule{{
			Action: v3.Allow, Protocol: Proto("TCP"),
			Source:      v3.EntityRule{Selector: "role == 'node'"},
			Destination: v3.EntityRule{Ports: Ports("10250")},
		}}, nil),

		// Host endpoint policy kinds: applyOnForward (also forwarded
		// traffic), preDNAT (mangle), doNotTrack (raw); and an
		// all-interfaces host endpoint.
		HostPolicy(GNP("host.forward-web", "default", Ptr(60.0), "role == 'node'", Both,
			[]v3.Rule{{Action: v3.Allow, Protocol: Proto("TCP"), Destination: v3.EntityRule{Ports: Ports("80")}}},
			[]v3.Rule{{Action: v3.Allow}}), true, false, false),
		HostPolicy(GNP("host.prednat-block", "default", Ptr(70.0), "role == 'node'", Ingress,
			[]v3.Rule{{Action: v3.Deny, Source: v3.EntityRule{Nets: []string{"198.51.100.0/24"}}}}, nil), false, true, false),
		HostPolicy(GNP("host.untracked-dns", "default", Ptr(80.0), "has(role)", Both,
			[]v3.Rule{{Action: v3.Allow, Protocol: Proto("UDP"), Destination: v3.EntityRule{Ports: Ports("53")}}},
			[]v3.Rule{{Action: v3.Allow, Protocol: Proto("UDP"), Source: v3.EntityRule{Ports: Ports("53")}}}), false, false, true),
		HEP("node1-all", Node, "*", map[string]string{"role": "all-interfaces"}),
		GNP("host.all-ssh", "default", Ptr(90.0), "role == 'all-interfaces'", Ingress,
			[]v3.Rule{{Action: v3.Allow, Protocol: Proto("TCP"), Destination: v3.EntityRule{Ports: Ports("2222")}}}, nil),
	}
}

// scenarioBadInput is the Scenario's bad input: a policy in a missing
// tier (skipped), and two invalid policies in a namespace with no
// endpoints (enforced as denying everything of what they may select,
// which is nothing there).
func scenarioBadInput() []any {
	return []any{
		NP("idle", "bad-selector", nil, "app == ", Ingress, []v3.Rule{{Action: v3.Allow}}, nil),
		GNP("missing-tier.p", "missing-tier", nil, "all()", Ingress, []v3.Rule{{Action: v3.Deny}}, nil),
		NP("idle", "bad-port", nil, "all()", Ingress, []v3.Rule{{Action: v3.Allow, Protocol: Proto("TCP"),
			Destination: v3.EntityRule{Ports: []numorstring.Port{{MinPort: 90, MaxPort: 80}}}}}, nil),
	}
}

func withPorts(w *v3.WorkloadEndpoint, ports ...v3.WorkloadEndpointPort) *v3.WorkloadEndpoint {
	w.Spec.Ports = ports
	return w
}

func withSA(w *v3.WorkloadEndpoint, sa string) *v3.WorkloadEndpoint {
	w.Spec.ServiceAccountName = sa
	return w
}
