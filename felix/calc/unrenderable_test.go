package calc_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// A rule felix cannot render (here a services match, which validation
// accepts as Calico does) must never fail open: an Allow is dropped, a
// Deny is widened to what can be rendered, a Pass or Log denies what
// reaches it. The rest of the policy stays in force.
func TestUnrenderableRulesFailClosed(t *testing.T) {
	svcSrc := v3.EntityRule{Services: &v3.ServiceMatch{Name: "api", Namespace: "dev"}}
	tcp := ct.Proto("TCP")
	allowPort := v3.Rule{Action: v3.Allow, Protocol: tcp, Destination: v3.EntityRule{Ports: ct.Ports("8080")}}
	wantAllowPort := calc.Rule{Action: v3.Allow, Index: 1, Protocol: 6, Dst: calc.EntityMatch{
		Ports: []calc.PortRange{{Min: 8080, Max: 8080}}, HasPortConstraint: true}}
	tests := []struct {
		name     string
		action   v3.Action
		want     []calc.Rule
		handling calc.Handling
	}{
		{"Deny is widened to the rest of its matches", v3.Deny,
			[]calc.Rule{{Action: v3.Deny, Protocol: 6}, wantAllowPort}, calc.Widened},
		{"Allow is dropped", v3.Allow,
			[]calc.Rule{wantAllowPort}, calc.Dropped},
		{"Pass denies what reaches it", v3.Pass,
			[]calc.Rule{{Action: v3.Deny}, wantAllowPort}, calc.Denied},
		{"Log denies what reaches it", v3.Log,
			[]calc.Rule{{Action: v3.Deny}, wantAllowPort}, calc.Denied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gnp := ct.GNP("guard", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress,
				[]v3.Rule{{Action: tt.action, Protocol: tcp, Source: svcSrc}, allowPort}, nil)
			res := calc.Compute(ct.Input(ct.Node, []any{
				ct.NSProfile("prod", nil),
				ct.WEP("prod", "web", ct.Node, "caliweb", "10.65.0.1", map[string]string{"app": "web"}),
				gnp,
			}))
			if len(res.Problems) != 0 {
				t.Errorf("problems = %v, want none: the policy is not skipped", res.Problems)
			}
			id := calc.PolicyID{Tier: "default", Name: "guard"}
			p := res.Policies[id]
			if p == nil {
				t.Fatalf("policy %s is not active: a policy with an unrenderable rule was skipped", id)
			}
			if tt.action == v3.Pass || tt.action == v3.Log {
				// A Deny of everything reaching the rule: protocol
				// and source unknown, so neither is kept.
				tt.want[0].Protocol = 0
			}
			if diff := cmp.Diff(tt.want, p.Ingress, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ingress rules (-want +got):\n%s", diff)
			}
			if web := endpoint(t, res, "prod/node1-k8s-web-eth0"); len(web.Ingress) != 1 || web.Ingress[0].Policies[0] != id {
				t.Errorf("web ingress tiers = %+v, want the policy", web.Ingress)
			}
			want := []calc.Unrenderable{{Kind: v3.KindGlobalNetworkPolicy, Name: "guard", Direction: "ingress", Rule: 0,
				Action: tt.action, Handling: tt.handling, Reason: calc.ReasonServices,
				Detail: "source: services match (service dev/api): felix follows Kubernetes Services only on the Kubernetes datastore, as Calico's"}}
			if diff := cmp.Diff(want, res.Unrenderable); diff != "" {
				t.Errorf("unrenderable (-want +got):\n%s", diff)
			}
		})
	}
}

// An egress Deny to a service in a namespaced policy becomes a Deny of the
// rule's other matches (here all TCP).
func TestUnrenderableEgressDenyWidened(t *testing.T) {
	np := ct.NP("prod", "no-api", nil, "all()", ct.Egress, nil, []v3.Rule{
		{Action: v3.Deny, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api"}}},
		{Action: v3.Allow},
	})
	res := calc.Compute(ct.Input(ct.Node, []any{
		ct.NSProfile("prod", nil), ct.WEP("prod", "web", ct.Node, "caliweb", "10.65.0.1", nil), np,
	}))
	p := res.Policies[calc.PolicyID{Tier: "default", Namespace: "prod", Name: "no-api"}]
	if p == nil {
		t.Fatal("policy skipped")
	}
	want := []calc.Rule{{Action: v3.Deny, Protocol: 6}, {Action: v3.Allow, Index: 1}}
	if diff := cmp.Diff(want, p.Egress, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("egress rules (-want +got):\n%s", diff)
	}
	if len(res.Unrenderable) != 1 || res.Unrenderable[0].Handling != calc.Widened || res.Unrenderable[0].Namespace != "prod" {
		t.Errorf("unrenderable = %v, want one widened Deny", res.Unrenderable)
	}
}

// A profile with an unrenderable Deny used to lose all its rules ("allows
// nothing"), so a later profile of the endpoint allowed what the Deny
// should have dropped. Now the Deny is widened and still drops first.
func TestUnrenderableProfileDenyWidened(t *testing.T) {
	guard := ct.NSProfile("guard", nil)
	guard.Name = "guard"
	guard.Spec.Ingress = []v3.Rule{{Action: v3.Deny, Source: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api", Namespace: "dev"}}}}
	w := ct.WEP("prod", "web", ct.Node, "caliweb", "10.65.0.1", nil)
	w.Spec.Profiles = []string{"guard", "kns.prod"}
	res := calc.Compute(ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), guard, w}))
	got := res.Profiles["guard"]
	if got == nil || len(got.Ingress) != 1 || got.Ingress[0].Action != v3.Deny || got.Ingress[0].Src.SelSet != "" {
		t.Fatalf("profile guard = %+v, want one Deny of everything", got)
	}
	if len(res.Unrenderable) != 1 || res.Unrenderable[0].Kind != v3.KindProfile || res.Unrenderable[0].Handling != calc.Widened {
		t.Errorf("unrenderable = %v, want the profile's widened Deny", res.Unrenderable)
	}
}

// The Engine reports unrenderable rules as Compute does, in every Result
// (not only the Flush that loaded the policy): after nothing changed,
// after the policy was sent again, after an unrelated change.
func TestUnrenderableReportedByEveryFlush(t *testing.T) {
	pol := ct.NP("prod", "p", nil, "all()", ct.Ingress, []v3.Rule{
		{Action: v3.Allow, Source: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api"}}}}, nil)
	objs := []any{ct.NSProfile("prod", nil), ct.WEP("prod", "web", ct.Node, "caliweb", "10.65.0.1", nil), pol}
	want := calc.Compute(ct.Input(ct.Node, objs)).Unrenderable
	if len(want) != 1 {
		t.Fatalf("unrenderable = %v, want 1", want)
	}
	e := calc.NewEngine(ct.Node)
	for _, o := range objs {
		e.Upsert(o)
	}
	for i, change := range []func(){
		func() {},
		func() {},
		func() { e.Upsert(pol) },
		func() { e.Upsert(ct.WEP("prod", "other", "node2", "calio", "10.65.0.2", nil)) },
	} {
		change()
		res, _ := e.Flush()
		if diff := cmp.Diff(want, res.Unrenderable); diff != "" {
			t.Fatalf("flush %d: (-want +got):\n%s", i, diff)
		}
	}
}
