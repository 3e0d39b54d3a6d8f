package collector_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/collector"
)

// TestPendingPolicies: flows reported at a workload of the node carry
// the path with the staged policies as policies of their own (Calico's
// pending trace): a staged deny before the allowing policy, a staged
// policy of an enforced policy's name next to it, a staged Kubernetes
// policy, a staged global policy in a tier of staged policies only, a
// Delete staging nothing; an end elsewhere or a host endpoint carries
// none; a deleted staged policy no longer counts.
func TestPendingPolicies(t *testing.T) {
	tcp := ct.Proto("TCP")
	staged := func(name string, order float64, action v3.StagedAction, in []v3.Rule) *v3.StagedNetworkPolicy {
		return &v3.StagedNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name},
			Spec:       v3.StagedNetworkPolicySpec{StagedAction: action, Order: ct.Ptr(order), Selector: "app == 'web'", Types: ct.Ingress, Ingress: in}}
	}
	lockdown := staged("lockdown", 10, v3.StagedActionSet, []v3.Rule{{Action: v3.Deny, Protocol: tcp, Destination: v3.EntityRule{Ports: ct.Ports("9090")}}})
	objs := []v3.Resource{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", "n1", "caliaaaa", "10.0.0.2", map[string]string{"app": "web"}),
		ct.WEP("dev", "client", "n1", "calicccc", "10.0.0.1", map[string]string{"app": "client"}),
		ct.WEP("dev", "far", "n2", "calidddd", "10.0.1.1", map[string]string{"app": "client"}),
		ct.HEP("n1-eth0", "n1", "eth0", nil, "10.0.9.1"),
		ct.NP("prod", "web", ct.Ptr(100.0), "app == 'web'", ct.Ingress, []v3.Rule{{Action: v3.Allow, Protocol: tcp}}, nil),
		lockdown,
		// Of the enforced policy's name: evaluated next to it (order 200,
		// after it), never instead of it.
		staged("web", 200, v3.StagedActionSet, []v3.Rule{{Action: v3.Deny}}),
		staged("gone", 1, v3.StagedActionDelete, nil),
		&v3.StagedKubernetesNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedKubernetesNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "client-egress"},
			Spec: v3.StagedKubernetesNetworkPolicySpec{StagedAction: v3.StagedActionSet,
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}},
		ct.Tier("audit", 50, v3.Deny),
		&v3.StagedGlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "audit.pass-dev"},
			Spec: v3.StagedGlobalNetworkPolicySpec{Tier: "audit", Selector: "app == 'web'", Types: ct.Ingress,
				Ingress: []v3.Rule{{Action: v3.Pass, Source: v3.EntityRule{Nets: []string{"10.0.0.1/32"}}}}}},
	}
	l := collector.NewLookups()
	var ups []datastore.Update
	for _, r := range objs {
		r.Default()
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
	}
	l.OnUpdates(ups)
	tuple := func(src, dst string, port uint16) collector.Tuple {
		return collector.Tuple{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Proto: 6, SrcPort: 40000, DstPort: port}
	}
	pass := collector.PolicyHit{Kind: "sgnp", Tier: "audit", Name: "audit.pass-dev", Action: "Pass", RuleIndex: 0}
	eotAudit := collector.PolicyHit{Kind: "eot", Tier: "audit", Action: "Deny", RuleIndex: -1}
	for _, tc := range []struct {
		desc    string
		ingress bool
		t       collector.Tuple
		want    []collector.PolicyHit
		ok      bool
	}{
		{"staged deny before the allow", true, tuple("10.0.0.1", "10.0.0.2", 9090), []collector.PolicyHit{pass,
			{Kind: "snp", Tier: "default", Namespace: "prod", Name: "lockdown", Action: "Deny", RuleIndex: 0}}, true},
		{"allowed, staged policies that do not match", true, tuple("10.0.0.1", "10.0.0.2", 8080), []collector.PolicyHit{pass,
			{Kind: "np", Tier: "default", Namespace: "prod", Name: "web", Action: "Allow", RuleIndex: 0}}, true},
		{"a staged tier's end", true, tuple("10.0.1.1", "10.0.0.2", 8080), []collector.PolicyHit{eotAudit}, true},
		{"a staged Kubernetes default deny of egress", false, tuple("10.0.0.1", "10.0.0.2", 8080), []collector.PolicyHit{
			{Kind: "eot", Tier: "default", Action: "Deny", RuleIndex: -1}}, true},
		{"reported at a workload of another node", false, tuple("10.0.1.1", "10.0.0.2", 8080), nil, false},
		{"reported at a host endpoint", true, tuple("10.0.0.1", "10.0.9.1", 22), nil, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := l.Pending("n1", tc.ingress, tc.t)
			if ok != tc.ok {
				t.Fatalf("evaluated %v, want %v", ok, tc.ok)
			}
			for i := range tc.want {
				tc.want[i].Index = i
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
		})
	}
	// The staged deny deleted: the allowing policy decides, then the
	// staged policy of its name is never reached.
	l.OnUpdates([]datastore.Update{{Type: datastore.EventDeleted, Key: datastore.KeyOf(lockdown)}})
	got, _ := l.Pending("n1", true, tuple("10.0.0.1", "10.0.0.2", 9090))
	want := []collector.PolicyHit{pass, {Index: 1, Kind: "np", Tier: "default", Namespace: "prod", Name: "web", Action: "Allow", RuleIndex: 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the delete (-want +got):\n%s", diff)
	}

	// The aggregator gives each flow of an interval its pending path.
	agg := collector.NewAggregator("n1", l, nil, nil, time.Unix(0, 0))
	agg.EvaluatePending = true
	agg.Add(true, collector.Packet{Tuple: tuple("10.0.0.1", "10.0.0.2", 9090), Prefix: "API0|np/prod/web", Bytes: 60})
	flows := agg.Flush(time.Unix(1, 0))
	if len(flows) != 1 || cmp.Diff(want, flows[0].Pending) != "" {
		t.Errorf("flows %+v, want one with pending %+v", flows, want)
	}
}

// TestPendingServicesMatch: where felix follows Services, the pending
// path of a flow allowed by a services match is felix's own (the Allow);
// where it does not, such a rule fails closed in the pending path as in
// felix.
func TestPendingServicesMatch(t *testing.T) {
	tcp := ct.Proto("TCP")
	objs := []v3.Resource{
		ct.NSProfile("prod", nil),
		ct.WEP("prod", "client", "n1", "calicccc", "10.0.0.1", map[string]string{"app": "client"}),
		ct.WEP("prod", "api", "n2", "caliaaaa", "10.0.1.5", map[string]string{"app": "api"}),
		ct.NP("prod", "to-api", ct.Ptr(100.0), "app == 'client'", ct.Egress, nil,
			[]v3.Rule{{Action: v3.Allow, Protocol: tcp, Destination: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api"}}}}),
	}
	slice := ct.EndpointSlice("prod", "api-x1", "api", []string{"10.0.1.5"}, ct.SlicePort{Proto: "TCP", Port: 8080})
	flow := collector.Tuple{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.1.5"), Proto: 6, SrcPort: 40000, DstPort: 8080}
	for _, follow := range []bool{true, false} {
		l := collector.NewLookups()
		if follow {
			l.FollowServices()
		}
		var ups []datastore.Update
		for _, r := range objs {
			r.Default()
			ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
		}
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.Key{Kind: v3.KindKubernetesEndpointSlice, Namespace: "prod", Name: "api-x1"}, Object: slice})
		l.OnUpdates(ups)
		got, ok := l.Pending("n1", false, flow)
		if !ok || len(got) == 0 {
			t.Fatalf("follow %v: pending %v, %v; want a path", follow, got, ok)
		}
		last := got[len(got)-1]
		allowed := last.Action == "Allow" && last.Name == "to-api"
		if allowed != follow {
			t.Errorf("follow %v: pending path %+v; want the services match to allow only when following Services", follow, got)
		}
	}
}
