package collector_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestParsePrefixReadsRules: every prefix felix's rules write is read
// back as the verdict it stands for.
func TestParsePrefixReadsRules(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   collector.Verdict
	}{
		{rules.NFLOGPrefix(rules.VerdictAllow, rules.OwnerPolicy, rules.DirIngress, 3, rules.PolicyNFLOGID(calc.PolicyID{Tier: "default", Namespace: "prod", Name: "web"})),
			collector.Verdict{Action: "Allow", Owner: "policy", Ingress: true, RuleIndex: 3, Kind: "np", Namespace: "prod", Name: "web"}},
		{rules.NFLOGPrefix(rules.VerdictDeny, rules.OwnerPolicy, rules.DirEgress, 0, rules.PolicyNFLOGID(calc.PolicyID{Tier: "sec", Name: "sec.block"})),
			collector.Verdict{Action: "Deny", Owner: "policy", RuleIndex: 0, Kind: "gnp", Name: "sec.block"}},
		{rules.NFLOGPrefix(rules.VerdictPass, rules.OwnerPolicy, rules.DirIngress, 12, rules.PolicyNFLOGID(calc.PolicyID{Tier: "default", Namespace: "x", Name: "knp.default.allow"})),
			collector.Verdict{Action: "Pass", Owner: "policy", Ingress: true, RuleIndex: 12, Kind: "knp", Namespace: "x", Name: "allow"}},
		{rules.NFLOGPrefix(rules.VerdictAllow, rules.OwnerProfile, rules.DirEgress, 0, "kns.dev"),
			collector.Verdict{Action: "Allow", Owner: "profile", RuleIndex: 0, Name: "kns.dev"}},
		{rules.EndOfTierNFLOGPrefix(rules.DirIngress, "security"),
			collector.Verdict{Action: "Deny", Owner: "policy", Ingress: true, EndOfTier: true, Tier: "security", RuleIndex: -1}},
		{rules.NoProfileNFLOGPrefix(rules.DirEgress),
			collector.Verdict{Action: "Deny", Owner: "profile", NoProfile: true, RuleIndex: -1}},
	} {
		got, err := collector.ParsePrefix(tc.prefix)
		if err != nil {
			t.Errorf("%q: %v", tc.prefix, err)
			continue
		}
		tc.want.Prefix = tc.prefix
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.prefix, diff)
		}
	}
	long := rules.NFLOGPrefix('D', 'P', 'I', 1, "gnp/"+strings.Repeat("x", 80))
	if v, err := collector.ParsePrefix(long); err != nil || !v.Hashed {
		t.Errorf("shortened prefix %q: %+v %v, want marked hashed", long, v, err)
	}
	for _, bad := range []string{"", "XP", "APX0|a", "APIx|np/a/b", "API0|nons", "DRIx"} {
		if _, err := collector.ParsePrefix(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

type fakeResolver map[string]collector.Endpoint

func (f fakeResolver) Endpoint(ip string) collector.Endpoint {
	if e, ok := f[ip]; ok {
		return e
	}
	return collector.Endpoint{Kind: "net", Name: "pvt"}
}

func (f fakeResolver) PolicyTier(kind, ns, name string) string { return "default" }

func (f fakeResolver) Unhash(string) (collector.Verdict, bool) { return collector.Verdict{}, false }

func (f fakeResolver) Pending(string, bool, collector.Tuple) ([]collector.PolicyHit, bool) {
	return nil, false
}

func (f fakeResolver) Reporter(string, bool, collector.Tuple) (collector.Attribution, bool) {
	return collector.Attribution{All: true}, true
}

// TestAggregator: a denied connection's retransmissions are one flow with
// every packet counted; an allowed connection is one flow whose counts
// come from conntrack (deltas, under the tuple after DNAT), live until it
// leaves conntrack, then completed; the Pass before a verdict is on the
// path; the rule counters follow.
func TestAggregator(t *testing.T) {
	res := fakeResolver{"10.0.0.1": {Kind: "wep", Namespace: "dev", Name: "client"}, "10.0.0.2": {Kind: "wep", Namespace: "prod", Name: "web"}}
	reg := prometheus.NewRegistry()
	counters := collector.NewRuleCounters(reg)
	t0 := time.Unix(1000, 0)
	agg := collector.NewAggregator("n1", res, counters, nil, t0)
	tuple := func(sport, dport uint16) collector.Tuple {
		return collector.Tuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Proto: 6, SrcPort: sport, DstPort: dport}
	}
	pass := "PPI0|gnp/sec.pass"
	for range 3 { // a SYN and two retransmissions
		agg.Add(true, collector.Packet{Tuple: tuple(40000, 81), Prefix: pass, Bytes: 60})
		agg.Add(true, collector.Packet{Tuple: tuple(40000, 81), Prefix: "DPI0|np/prod/web", Bytes: 60})
	}
	agg.Add(true, collector.Packet{Tuple: tuple(40001, 80), Prefix: pass, Bytes: 60})
	agg.Add(true, collector.Packet{Tuple: tuple(40001, 80), Prefix: "API1|np/prod/web", Bytes: 60})
	// The connection went through DNAT: conntrack's original tuple has
	// the service address; the dump lists it under the tuple after DNAT
	// too.
	agg.Conntrack(map[collector.Tuple]collector.Conn{tuple(40001, 80): {Packets: 4, Bytes: 300}})
	agg.Conntrack(map[collector.Tuple]collector.Conn{tuple(40001, 80): {Packets: 10, Bytes: 1000}})
	flows := agg.Flush(t0.Add(time.Second))
	if len(flows) != 2 {
		t.Fatalf("flows: %+v", flows)
	}
	allow, deny := flows[0], flows[1]
	if allow.Action != "Allow" || allow.Packets != 10 || allow.Bytes != 1000 || allow.ConnectionsStarted != 1 || allow.ConnectionsLive != 1 ||
		allow.DestPort != 80 || allow.Reporter != "Dst" || allow.Source.Name != "client" || allow.Dest.Name != "web" ||
		!allow.StartTime.Equal(t0) || !allow.EndTime.Equal(t0.Add(time.Second)) {
		t.Errorf("allowed flow %+v", allow)
	}
	wantPath := []collector.PolicyHit{
		{Index: 0, Kind: "gnp", Tier: "default", Name: "sec.pass", Action: "Pass", RuleIndex: 0},
		{Index: 1, Kind: "np", Tier: "default", Namespace: "prod", Name: "web", Action: "Allow", RuleIndex: 1},
	}
	if diff := cmp.Diff(wantPath, allow.Enforced); diff != "" {
		t.Errorf("allowed path (-want +got):\n%s", diff)
	}
	if deny.Action != "Deny" || deny.Packets != 3 || deny.Bytes != 180 || deny.DestPort != 81 || len(deny.Enforced) != 2 {
		t.Errorf("denied flow %+v", deny)
	}
	// Next interval: the connection is still live (reported, counts
	// grow), then gone (completed).
	agg.Conntrack(map[collector.Tuple]collector.Conn{tuple(40001, 80): {Packets: 12, Bytes: 1100}})
	flows = agg.Flush(t0.Add(2 * time.Second))
	if len(flows) != 1 || flows[0].Packets != 2 || flows[0].Bytes != 100 || flows[0].ConnectionsStarted != 0 || flows[0].ConnectionsLive != 1 {
		t.Errorf("second interval %+v", flows)
	}
	agg.Conntrack(map[collector.Tuple]collector.Conn{})
	flows = agg.Flush(t0.Add(3 * time.Second))
	if len(flows) != 1 || flows[0].ConnectionsCompleted != 1 || flows[0].ConnectionsLive != 0 || flows[0].Packets != 0 {
		t.Errorf("third interval %+v", flows)
	}
	if flows := agg.Flush(t0.Add(4 * time.Second)); len(flows) != 0 {
		t.Errorf("quiet interval %+v", flows)
	}
	want := `
# HELP felix_policy_rule_bytes_total Bytes through each policy rule's verdict (from flow logs: NFLOG and conntrack).
# TYPE felix_policy_rule_bytes_total counter
felix_policy_rule_bytes_total{action="Allow",direction="ingress",namespace="prod",policy="web",rule_index="1",tier="default"} 1100
felix_policy_rule_bytes_total{action="Deny",direction="ingress",namespace="prod",policy="web",rule_index="0",tier="default"} 180
felix_policy_rule_bytes_total{action="Pass",direction="ingress",namespace="",policy="sec.pass",rule_index="0",tier="default"} 1280
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "felix_policy_rule_bytes_total"); err != nil {
		t.Error(err)
	}
	wantConns := `
# HELP felix_policy_rule_connections_total Connections allowed (first packets) by each policy rule's verdict.
# TYPE felix_policy_rule_connections_total counter
felix_policy_rule_connections_total{action="Allow",direction="ingress",namespace="prod",policy="web",rule_index="1",tier="default"} 1
felix_policy_rule_connections_total{action="Pass",direction="ingress",namespace="",policy="sec.pass",rule_index="0",tier="default"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantConns), "felix_policy_rule_connections_total"); err != nil {
		t.Error(err)
	}
	if agg.Add(true, collector.Packet{Prefix: "bogus"}); agg.ParseErrors != 1 {
		t.Errorf("parse errors %d", agg.ParseErrors)
	}
}

// TestLookupsUnhash: a shortened prefix of a known policy's rule, a
// profile's rule or a tier's end is read back to its owner; an unknown
// one is not; a policy's update is seen.
func TestLookupsUnhash(t *testing.T) {
	long := strings.Repeat("very-long-name-", 5)
	l := collector.NewLookups()
	gnp := &v3.GlobalNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "sec." + long}, Spec: v3.GlobalNetworkPolicySpec{Tier: "sec",
		Ingress: []v3.Rule{{Action: v3.Pass}, {Action: v3.Deny}}}}
	knp := &v3.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-" + long, Name: "knp.default.x"},
		Spec: v3.NetworkPolicySpec{Egress: []v3.Rule{{Action: v3.Allow}}}}
	prof := &v3.Profile{ObjectMeta: metav1.ObjectMeta{Name: "kns." + long}, Spec: v3.ProfileSpec{Ingress: []v3.Rule{{Action: v3.Allow}}}}
	tier := &v3.Tier{ObjectMeta: metav1.ObjectMeta{Name: "tier-" + long}}
	var ups []datastore.Update
	for _, o := range []v3.Resource{gnp, knp, prof, tier} {
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.Key{Kind: kindOf(o), Namespace: o.GetNamespace(), Name: o.GetName()}, Object: o})
	}
	l.OnUpdates(ups)
	for _, tc := range []struct {
		prefix string
		want   string
	}{
		{rules.NFLOGPrefix('D', 'P', 'I', 1, "gnp/sec."+long), "Deny policy gnp  sec." + long + " 1 true"},
		{rules.NFLOGPrefix('A', 'P', 'E', 0, "knp/ns-"+long+"/x"), "Allow policy knp ns-" + long + " x 0 false"},
		{rules.NFLOGPrefix('A', 'R', 'I', 0, "kns."+long), "Allow profile   kns." + long + " 0 true"},
		{rules.EndOfTierNFLOGPrefix('E', "tier-"+long), "Deny policy    -1 false tier-" + long},
	} {
		v, ok := l.Unhash(tc.prefix)
		got := fmt.Sprintf("%s %s %s %s %s %d %v", v.Action, v.Owner, v.Kind, v.Namespace, v.Name, v.RuleIndex, v.Ingress)
		if v.EndOfTier {
			got += " " + v.Tier
		}
		if !ok || got != tc.want || len(tc.prefix) != 63 {
			t.Errorf("%q: %q %v, want %q", tc.prefix, got, ok, tc.want)
		}
	}
	if _, ok := l.Unhash(rules.NFLOGPrefix('D', 'P', 'I', 7, "gnp/sec."+long)); ok {
		t.Error("a rule index the policy does not have was read back")
	}
	gnp.Spec.Ingress = append(gnp.Spec.Ingress, make([]v3.Rule, 6)...)
	l.OnUpdates([]datastore.Update{{Type: datastore.EventModified, Key: datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: gnp.Name}, Object: gnp}})
	if _, ok := l.Unhash(rules.NFLOGPrefix('D', 'P', 'I', 7, "gnp/sec."+long)); !ok {
		t.Error("the updated policy's rule 7 was not read back")
	}
}

func kindOf(o v3.Resource) string {
	switch o.(type) {
	case *v3.GlobalNetworkPolicy:
		return v3.KindGlobalNetworkPolicy
	case *v3.NetworkPolicy:
		return v3.KindNetworkPolicy
	case *v3.Profile:
		return v3.KindProfile
	}
	return v3.KindTier
}
