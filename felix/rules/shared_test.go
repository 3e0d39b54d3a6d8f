package rules_test

import (
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestWorkloadsShareChainBodies: workloads with the same policies and
// profiles in a direction go to one body chain; a workload whose policies
// differ gets its own; every workload keeps its named cali-tw-/cali-fw-
// chain holding a single goto, reached from the dispatch chains.
func TestWorkloadsShareChainBodies(t *testing.T) {
	allow := []v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Ports: ct.Ports("80")}}}
	objs := []any{
		ct.NSProfile("prod", nil),
		ct.WEP("prod", "web-1", ct.Node, "caliweb1", "10.0.0.1", map[string]string{"app": "web"}),
		ct.WEP("prod", "web-2", ct.Node, "caliweb2", "10.0.0.2", map[string]string{"app": "web"}),
		ct.WEP("prod", "db-1", ct.Node, "calidb1", "10.0.0.3", map[string]string{"app": "db"}),
		ct.NP("prod", "web", nil, "app == 'web'", []v3.PolicyType{v3.PolicyTypeIngress}, allow, nil),
	}
	rs := rules.Render(rules.DefaultConfig(), calc.Compute(ct.Input(ct.Node, objs)), 4)
	target := func(chain string) string {
		lines := chainText(rs.Chains, chain)
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "-g ") {
			t.Fatalf("%s = %q, want one goto", chain, lines)
		}
		return strings.TrimPrefix(lines[0], "-g ")
	}
	web1, web2, db := target("cali-tw-caliweb1"), target("cali-tw-caliweb2"), target("cali-tw-calidb1")
	if web1 != web2 || web1 == db {
		t.Errorf("ingress bodies: web-1 %s, web-2 %s, db-1 %s; want the web pods to share one and db to have another", web1, web2, db)
	}
	if !strings.HasPrefix(web1, rules.PrefixToWorkloadShared) || len(web1) > rules.MaxChainNameLength {
		t.Errorf("body name %q", web1)
	}
	if !has(chainText(rs.Chains, web1), rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Namespace: "prod", Name: "web"})) {
		t.Errorf("web's body %q does not jump to its policy", chainText(rs.Chains, web1))
	}
	if has(chainText(rs.Chains, db), "cali-pi-") {
		t.Errorf("db's body %q jumps to a policy", chainText(rs.Chains, db))
	}
	// Egress: no policy anywhere, so all three share the profile-only body.
	if e1, e2, e3 := target("cali-fw-caliweb1"), target("cali-fw-caliweb2"), target("cali-fw-calidb1"); e1 != e2 || e2 != e3 {
		t.Errorf("egress bodies %s %s %s, want one", e1, e2, e3)
	}
	n := 0
	for _, c := range rs.Chains {
		if strings.HasPrefix(c.Name, rules.PrefixToWorkloadShared) || strings.HasPrefix(c.Name, rules.PrefixFromWorkloadShared) {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d body chains, want 3 (two ingress, one egress), each once", n)
	}
	if !has(chainText(rs.Chains, rules.ChainToWlDispatch), "-o caliweb1 -g cali-tw-caliweb1") {
		t.Errorf("dispatch %q", chainText(rs.Chains, rules.ChainToWlDispatch))
	}
}
