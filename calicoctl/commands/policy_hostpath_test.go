package commands

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/rules"
)

// hostPathScenario: two nodes on one subnet, pods on each, node2's eth0
// a named host endpoint (expectedIPs its address) with an applyOnForward
// policy denying TCP 81 forwarded in; pool mode as given.
func hostPathScenario(ipip v3.IPIPMode) *policySnapshot {
	node := func(name, addr string) *v3.Node {
		return &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: addr}}}
	}
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: v3.IPPoolSpec{CIDR: "10.65.0.0/16", IPIPMode: ipip, VXLANMode: v3.VXLANModeNever}}
	gnp := ct.GNP("hep-fwd", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress,
		[]v3.Rule{{Action: v3.Deny, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Ports: ct.Ports("81")}}, {Action: v3.Allow}}, nil)
	gnp.Spec.ApplyOnForward = true
	s := &policySnapshot{endpointToHost: "Drop",
		cluster: infra.Derive([]*v3.IPPool{pool}, []*v3.Node{node("node1", "172.31.1.10/24"), node("node2", "172.31.1.11/24")})}
	for _, o := range []v3.Resource{
		ct.NSProfile("x", nil),
		ct.WEP("x", "a", "node1", "cali1111", "10.65.0.1", nil),
		ct.WEP("x", "b", "node2", "cali2222", "10.65.1.1", nil),
		ct.HEP("node2-eth0", "node2", "eth0", map[string]string{"role": "node"}, "172.31.1.11"),
		gnp,
	} {
		s.add(o)
	}
	return s
}

// TestTraceNamedHostEndpointForward: a flow between pods of two nodes
// crosses the interface holding the node's address when the pool does
// not encapsulate (the trace goes through node2's eth0 host endpoint's
// doNotTrack, preDNAT and applyOnForward chains: TCP 81 denied there,
// TCP 80 allowed on to the pod); over IPIP it crosses tunl0, which no
// host endpoint names: no host endpoint hop, a note says why. Leaving
// node2 through eth0 (egress) its forward egress chain is traced.
func TestTraceNamedHostEndpointForward(t *testing.T) {
	trace := func(s *policySnapshot, from, to, port string) *TraceReport {
		t.Helper()
		pkt, err := parsePort(port, 0)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := traceFlow(s, from, to, pkt)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	chains := func(rep *TraceReport) string {
		var out []string
		for _, h := range rep.Hops {
			out = append(out, h.Node+" "+h.Chain+" "+h.Verdict)
		}
		return strings.Join(out, "; ")
	}
	s := hostPathScenario(v3.IPIPModeNever)
	rep := trace(s, "x/a", "x/b", "tcp/81")
	want := "node1 cali-fw-cali1111 Allow; node2 raw cali-fh-eth0 Continue; node2 mangle cali-fh-eth0 Continue; node2 " + rules.PrefixFromHostEpFwd + "eth0 Deny"
	if rep.Verdict != "Deny" || chains(rep) != want {
		t.Errorf("tcp/81 over the underlay: %s via %s, want Deny via %s (notes %v)", rep.Verdict, chains(rep), want, rep.Notes)
	}
	rep = trace(s, "x/a", "x/b", "tcp/80")
	if rep.Verdict != "Allow" || len(rep.Hops) != 5 || rep.Hops[4].Chain != "cali-tw-cali2222" {
		t.Errorf("tcp/80 over the underlay: %s via %s", rep.Verdict, chains(rep))
	}
	rep = trace(s, "x/b", "x/a", "tcp/81")
	if rep.Verdict != "Allow" || len(rep.Hops) != 3 || rep.Hops[1].Chain != rules.PrefixToHostEpFwd+"eth0" {
		t.Errorf("leaving node2 through eth0: %s via %s", rep.Verdict, chains(rep))
	}
	s = hostPathScenario(v3.IPIPModeAlways)
	rep = trace(s, "x/a", "x/b", "tcp/81")
	if rep.Verdict != "Allow" || len(rep.Hops) != 2 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "crosses tunl0") {
		t.Errorf("over IPIP: %s via %s, notes %q", rep.Verdict, chains(rep), rep.Notes)
	}
}
