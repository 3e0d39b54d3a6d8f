package calctest

import (
	"fmt"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Synthetic builds a cluster for benchmarks: 50 namespaces, nLocal
// endpoints on Node and nRemote elsewhere (labels app=a<k%100>, a named
// port "http"), and nPolicies NetworkPolicies, policy i in namespace
// ns<i%50> selecting app a<i%100> and allowing TCP 80, 8000-8100 and
// "http" from app a<(i+1)%100> of the same namespace plus a CIDR list, and
// egress to any endpoint of a team. Each local endpoint gets about
// nPolicies/100 policies.
func Synthetic(nPolicies, nLocal, nRemote int) []any {
	var objs []any
	for n := range 50 {
		objs = append(objs, NSProfile(fmt.Sprintf("ns%d", n), map[string]string{"team": fmt.Sprintf("t%d", n%5)}))
	}
	ep := func(k int, node string) *v3.WorkloadEndpoint {
		w := WEP(fmt.Sprintf("ns%d", k%50), fmt.Sprintf("pod%d", k), node, fmt.Sprintf("cali%07x", k),
			fmt.Sprintf("10.%d.%d.%d", 64+k/65536, (k/256)%256, k%256), map[string]string{"app": fmt.Sprintf("a%d", k%100)})
		w.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080}}
		return w
	}
	for k := range nLocal {
		objs = append(objs, ep(k, Node))
	}
	for k := nLocal; k < nLocal+nRemote; k++ {
		objs = append(objs, ep(k, fmt.Sprintf("node%d", 2+k%50)))
	}
	for i := range nPolicies {
		objs = append(objs, SyntheticPolicy(i, 0))
	}
	return objs
}

// SyntheticPolicy is policy i of Synthetic; variant changes its rules
// (for one-policy-change measurements).
func SyntheticPolicy(i, variant int) *v3.NetworkPolicy {
	return NP(fmt.Sprintf("ns%d", i%50), fmt.Sprintf("pol%d", i), Ptr(float64(i%10)), fmt.Sprintf("app == 'a%d'", i%100), Both,
		[]v3.Rule{{
			Action: v3.Allow, Protocol: Proto("TCP"),
			Source:      v3.EntityRule{Selector: fmt.Sprintf("app == 'a%d'", (i+1)%100), NotNets: []string{"10.200.0.0/16"}},
			Destination: v3.EntityRule{Ports: Ports("80", "8000:8100", "http", fmt.Sprint(9000+variant))},
		}, {
			Action: v3.Allow, Protocol: Proto("UDP"),
			Source:      v3.EntityRule{Nets: []string{"192.168.0.0/16", "172.16.0.0/12"}},
			Destination: v3.EntityRule{Ports: Ports("53")},
		}},
		[]v3.Rule{{
			Action: v3.Allow, Destination: v3.EntityRule{NamespaceSelector: fmt.Sprintf("team == 't%d'", i%5)},
		}, {Action: v3.Deny}})
}
