package rules_test

import (
	"slices"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// policyChain returns the rule specs of a chain of rs, failing if absent.
func policyChain(t *testing.T, rs *rules.Ruleset, name string) []string {
	t.Helper()
	for _, c := range rs.Chains {
		if c.Name == name {
			var specs []string
			for _, r := range c.Rules {
				specs = append(specs, r.Match+" "+r.Action)
			}
			return specs
		}
	}
	t.Fatalf("no chain %s", name)
	return nil
}

// A Deny whose services match felix cannot render is enforced as a
// widened Deny (here: all TCP from anywhere), not skipped with its policy;
// an Allow with one is dropped; a Pass with one denies what reaches it.
func TestRenderUnrenderableRulesFailClosed(t *testing.T) {
	svc := v3.EntityRule{Services: &v3.ServiceMatch{Name: "api", Namespace: "dev"}}
	w := ct.WEP("prod", "web", ct.Node, "cali1111", "10.65.0.1", map[string]string{"app": "web"})
	for _, tc := range []struct {
		action v3.Action
		want   []string
	}{
		{v3.Deny, []string{"-p tcp -j DROP", "-p udp -m multiport --dports 53 -j MARK --set-xmark 0x10000/0x10000", "-m mark --mark 0x10000/0x10000 -j RETURN"}},
		{v3.Allow, []string{"-p udp -m multiport --dports 53 -j MARK --set-xmark 0x10000/0x10000", "-m mark --mark 0x10000/0x10000 -j RETURN"}},
		{v3.Pass, []string{" -j DROP", "-p udp -m multiport --dports 53 -j MARK --set-xmark 0x10000/0x10000", "-m mark --mark 0x10000/0x10000 -j RETURN"}},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			gnp := ct.GNP("guard", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
				{Action: tc.action, Protocol: ct.Proto("TCP"), Source: svc},
				{Action: v3.Allow, Protocol: ct.Proto("UDP"), Destination: v3.EntityRule{Ports: ct.Ports("53")}},
			}, nil)
			res := calc.Compute(ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), w, gnp}))
			rs := rules.Render(rules.DefaultConfig(), res, 4)
			got := policyChain(t, rs, rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Name: "guard"}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("policy chain:\n got %q\nwant %q", got, tc.want)
			}
			// The web endpoint's ingress goes through the policy.
			if !slices.ContainsFunc(rs.Chains, func(c rules.Chain) bool {
				return slices.ContainsFunc(c.Rules, func(r rules.Rule) bool {
					return r.Action == "-j "+rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Name: "guard"})
				})
			}) {
				t.Error("no endpoint chain jumps to the policy")
			}
		})
	}
}

// A rule with an action the renderer does not know is a DROP, never a rule
// without a target.
func TestRenderUnknownActionDrops(t *testing.T) {
	res := &calc.Result{
		Endpoints: []calc.Endpoint{{Kind: calc.Workload, Key: "prod/x", Interface: "cali1",
			Ingress: []calc.TierPolicies{{Tier: "default", DefaultAction: v3.Deny, Policies: []calc.PolicyID{{Tier: "default", Name: "p"}}}}}},
		Policies: map[calc.PolicyID]*calc.Policy{{Tier: "default", Name: "p"}: {ID: calc.PolicyID{Tier: "default", Name: "p"},
			Ingress: []calc.Rule{{Action: "Bogus"}}}},
		Profiles: map[string]*calc.Profile{},
		IPSets:   map[string]*calc.IPSet{},
	}
	rs := rules.Render(rules.DefaultConfig(), res, 4)
	got := policyChain(t, rs, rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Name: "p"}))
	if want := []string{" -j DROP"}; !slices.Equal(got, want) {
		t.Errorf("policy chain = %q, want %q", got, want)
	}
}
