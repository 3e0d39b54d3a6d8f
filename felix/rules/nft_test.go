package rules_test

import (
	"net/netip"
	"testing"

	"github.com/google/nftables/expr"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestNftTranslatesEveryRenderedRule: every rule the renderer produces
// for the golden scenarios (policies, profiles, host endpoints of every
// kind, every match kind), NAT outgoing, the tunnel and RPF rules, in
// both IP versions, has an nftables translation, and every set it looks
// up is one of the ruleset's.
func TestNftTranslatesEveryRenderedRule(t *testing.T) {
	for _, objs := range [][]any{ct.Scenario(), matchingScenarioForNft()} {
		for _, v := range []int{4, 6} {
			res, _ := ct.Load(ct.Node, objs).Flush()
			rs := rules.Render(rules.DefaultConfig(), res, v)
			pool := rules.NATPool{CIDR: netip.MustParsePrefix("10.70.0.0/16"), NATOutgoing: true}
			if v == 6 {
				pool.CIDR = netip.MustParsePrefix("fd00:70::/64")
			}
			rs = rules.WithNATOutgoing(rs, rules.NATConfig{Pools: []rules.NATPool{pool}})
			rs = rules.WithTunnelInput(rs, rules.TunnelConfig{IPIP: v == 4, VXLAN: true,
				AllHosts: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, VXLANHosts: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
			rs = rules.WithWorkloadRPF(rs, []string{"cali"})
			sets := map[string]bool{}
			for _, s := range rs.IPSets {
				sets[rules.NftSetName(s.Name)] = true
			}
			n := 0
			for _, tb := range rs.Tables() {
				for _, c := range tb.Chains {
					for _, r := range c.Rules {
						nrs, err := rules.NftRules(tb.Name, v, r)
						if err != nil {
							t.Errorf("v%d %s %s: %v", v, tb.Name, c.Name, err)
						}
						for _, nr := range nrs {
							n++
							for _, s := range nr.Sets {
								if !sets[s.Lookup.SetName] {
									t.Errorf("v%d %s %s looks up unknown set %s", v, tb.Name, c.Name, s.Lookup.SetName)
								}
							}
						}
					}
				}
			}
			if n < 50 {
				t.Errorf("v%d: only %d rules translated", v, n)
			}
		}
	}
}

func matchingScenarioForNft() []any { return matchingScenario() }

// TestNftRulesShapes checks the translations whose shape matters for
// correctness: port lists split into one rule per range, negated lists
// kept whole, jumps and gotos to table-prefixed chains, and refusals.
func TestNftRulesShapes(t *testing.T) {
	nrs, err := rules.NftRules("filter", 4, rules.Rule{Match: "-p tcp -m multiport --dports 80,8000:8080", Action: "-g cali-pi-x"})
	if err != nil || len(nrs) != 2 {
		t.Fatalf("dports list: %d rules, %v", len(nrs), err)
	}
	last := nrs[1].Exprs[len(nrs[1].Exprs)-1].(*expr.Verdict)
	if last.Kind != expr.VerdictGoto || last.Chain != "filter-cali-pi-x" {
		t.Errorf("goto: %+v", last)
	}
	if _, ok := nrs[1].Exprs[3].(*expr.Range); !ok {
		t.Errorf("range: %T", nrs[1].Exprs[3])
	}
	nrs, err = rules.NftRules("filter", 4, rules.Rule{Match: "-p tcp -m multiport ! --dports 80,81", Action: "-j DROP"})
	if err != nil || len(nrs) != 1 {
		t.Fatalf("negated dports: %d rules, %v", len(nrs), err)
	}
	for _, bad := range []rules.Rule{
		{Match: "-m foo --bar 1", Action: "-j DROP"},
		{Match: "-p tcp", Action: "-j REJECT"},
		{Match: "! -s 0.0.0.0/0", Action: "-j DROP"},
		{Match: "-s 10.0.0.0/8 !", Action: "-j DROP"},
		{Match: "-s fd00::/8", Action: "-j DROP"},
	} {
		if _, err := rules.NftRules("filter", 4, bad); err == nil {
			t.Errorf("%q %q translated", bad.Match, bad.Action)
		}
	}
}

// TestNftChainRulesDispatchMap: a run of exact-interface gotos becomes
// one verdict-map lookup (first rule of a name wins), other rules stay
// rules, and every rendered rule index is accounted for.
func TestNftChainRulesDispatchMap(t *testing.T) {
	rs := []rules.Rule{
		{Match: "-i cali1", Action: "-g cali-fw-cali1"},
		{Match: "-i cali2", Action: "-g cali-fw-cali2"},
		{Match: "-i cali1", Action: "-g cali-fw-other"},
		{Match: "-i cali+", Action: "-j DROP"},
		{Match: "-o eth0", Action: "-g cali-th-eth0"},
		{Match: "-m foo", Action: "-j ACCEPT"},
	}
	out, errs := rules.NftChainRules("filter", 4, rs)
	if len(errs) != 1 || errs[5] == nil {
		t.Errorf("errors: %v", errs)
	}
	if len(out) != 3 || out[0].Index != 0 || out[1].Index != 3 || out[2].Index != 4 {
		t.Fatalf("rules: %+v", out)
	}
	m := out[0].Rule.VMap
	if m == nil || len(m.Ifaces) != 2 || m.Chains[0] != "filter-cali-fw-cali1" || m.Chains[1] != "filter-cali-fw-cali2" {
		t.Errorf("map: %+v", m)
	}
	if out[2].Rule.VMap != nil {
		t.Error("a single goto became a map")
	}
}
