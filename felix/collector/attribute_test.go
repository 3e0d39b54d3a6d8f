package collector_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/collector"
)

// TestFlowsAttributedAsCalico: with the real Lookups, a packet's
// verdicts from a host endpoint's applyOnForward chain are counted but
// are no flow of their own (Calico's collector keeps only the reporting
// workload's policies): a forwarded connection allowed by the host
// endpoint and then by the workload's policy is one flow naming the
// workload's policy; one denied by the host endpoint's forward policy is
// no flow; traffic to the node's own host endpoint is no flow (Calico
// ignores host endpoint reporters); a remote end reports nothing here.
func TestFlowsAttributedAsCalico(t *testing.T) {
	tcp := ct.Proto("TCP")
	fwd := ct.GNP("hep-fwd", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress,
		[]v3.Rule{{Action: v3.Deny, Protocol: tcp, Destination: v3.EntityRule{Ports: ct.Ports("81")}}, {Action: v3.Allow}}, nil)
	fwd.Spec.ApplyOnForward = true
	objs := []v3.Resource{
		ct.NSProfile("prod", nil),
		ct.WEP("prod", "web", "n1", "caliaaaa", "10.0.0.2", map[string]string{"app": "web"}),
		ct.WEP("prod", "far", "n2", "calibbbb", "10.0.1.1", map[string]string{"app": "far"}),
		ct.HEP("n1-eth0", "n1", "eth0", map[string]string{"role": "node"}, "172.31.1.10"),
		fwd,
		ct.NP("prod", "web", ct.Ptr(100.0), "app == 'web'", ct.Ingress, []v3.Rule{{Action: v3.Allow, Protocol: tcp}}, nil),
	}
	l := collector.NewLookups()
	var ups []datastore.Update
	for _, r := range objs {
		r.Default()
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
	}
	l.OnUpdates(ups)
	reg := prometheus.NewRegistry()
	t0 := time.Unix(1000, 0)
	agg := collector.NewAggregator("n1", l, collector.NewRuleCounters(reg), nil, t0)
	tuple := func(src, dst string, port uint16) collector.Tuple {
		return collector.Tuple{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: 6, SrcPort: 40000, DstPort: port}
	}
	// far -> web tcp/80: the host endpoint's forward chain allows, then
	// web's policy.
	agg.Add(true, collector.Packet{Tuple: tuple("10.0.1.1", "10.0.0.2", 80), Prefix: "API1|gnp/hep-fwd", Bytes: 60})
	agg.Add(true, collector.Packet{Tuple: tuple("10.0.1.1", "10.0.0.2", 80), Prefix: "API0|np/prod/web", Bytes: 60})
	// far -> web tcp/81: denied in the forward chain.
	agg.Add(true, collector.Packet{Tuple: tuple("10.0.1.1", "10.0.0.2", 81), Prefix: "DPI0|gnp/hep-fwd", Bytes: 60})
	// far -> the node's own address: the host endpoint reports.
	agg.Add(true, collector.Packet{Tuple: tuple("10.0.1.1", "172.31.1.10", 80), Prefix: "API1|gnp/hep-fwd", Bytes: 60})
	// Logged at n1 for a flow between two other ends.
	agg.Add(true, collector.Packet{Tuple: tuple("10.0.0.2", "10.0.1.1", 80), Prefix: "API1|gnp/hep-fwd", Bytes: 60})
	flows := agg.Flush(t0.Add(time.Second))
	if len(flows) != 1 {
		t.Fatalf("want one flow (far -> web tcp/80), got %+v", flows)
	}
	f := flows[0]
	want := collector.PolicyHit{Kind: "np", Tier: "default", Namespace: "prod", Name: "web", Action: "Allow", RuleIndex: 0}
	if f.DestPort != 80 || f.Reporter != "Dst" || len(f.Enforced) != 1 || f.Enforced[0] != want || f.ConnectionsStarted != 1 {
		t.Errorf("flow %+v, want one started connection with the path [%+v]", f, want)
	}
	counts := `
# HELP felix_policy_rule_connections_total Connections allowed (first packets) by each policy rule's verdict.
# TYPE felix_policy_rule_connections_total counter
felix_policy_rule_connections_total{action="Allow",direction="ingress",namespace="",policy="hep-fwd",rule_index="1",tier="default"} 3
felix_policy_rule_connections_total{action="Allow",direction="ingress",namespace="prod",policy="web",rule_index="0",tier="default"} 1
# HELP felix_policy_rule_packets_total Packets through each policy rule's verdict (from flow logs: NFLOG and conntrack).
# TYPE felix_policy_rule_packets_total counter
felix_policy_rule_packets_total{action="Deny",direction="ingress",namespace="",policy="hep-fwd",rule_index="0",tier="default"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(counts), "felix_policy_rule_connections_total", "felix_policy_rule_packets_total"); err != nil {
		t.Error(err)
	}
}
