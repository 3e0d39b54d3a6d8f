package rules_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestNFLOGPrefix: Calico's prefixes, and its shortening past 62
// characters (the expected strings are Calico's own test vectors).
func TestNFLOGPrefix(t *testing.T) {
	const chars62 = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	const chars63 = chars62 + "0"
	long := "this-is-still-quite-a-long-tier-name-even-though-its-not-required.quite-a-long-policy-name"
	for _, tc := range []struct{ got, want string }{
		{rules.NFLOGPrefix('A', 'P', 'I', 0, rules.PolicyNFLOGID(calc.PolicyID{Tier: "default", Namespace: "namespace1", Name: "default.policy"})), "API0|np/namespace1/default.policy"},
		{rules.NFLOGPrefix('P', 'R', 'E', 999, "short.profile.name"), "PRE999|short.profile.name"},
		{rules.NFLOGPrefix('D', 'P', 'E', 88, "gnp/"+chars62), "DPE88|gnp/" + chars62},
		{rules.NFLOGPrefix('D', 'P', 'I', 88, "gnp/"+chars63), "DPI88|gnp/_12IXaBPahNM7a7dZhI8zg6PStmHsgneYaax8LVSIq_RSTUVWXYZ0"},
		{rules.NFLOGPrefix('D', 'P', 'E', 1, "gnp/"+long), "DPE1|gnp/t_FSGxA9eGa6t_A5Rj2agPvl4aq8-eohq0An6xEW4n7_olicy-name"},
		{rules.NFLOGPrefix('D', 'P', 'E', 2, "gnp/"+long+"2"), "DPE2|gnp/t_G4MaamO0BQNQg8Ibyy-r9qg2HIK8-7EaPOVzsy5Nv_licy-name2"},
		{rules.EndOfTierNFLOGPrefix('E', "tier-1"), "DPE|tier-1"},
		{rules.EndOfTierNFLOGPrefix('I', "tier-012345678901234567890123456789012345678901234567890123"), "DPI|tier-0_phEfG4Vhbq2xh4TQsePNa2X9YRj5peCVw1FgaNSbd_4567890123"},
		{rules.NoProfileNFLOGPrefix('I'), "DRI"},
		{rules.PolicyNFLOGID(calc.PolicyID{Tier: "default", Namespace: "x", Name: "knp.default.allow-y"}), "knp/x/allow-y"},
		{rules.PolicyNFLOGID(calc.PolicyID{Tier: "sec", Name: "sec.block"}), "gnp/sec.block"},
		{rules.PolicyNFLOGID(calc.PolicyID{Tier: "kube-admin", Name: "kcnp.deny-dev"}), "kcnp/deny-dev"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
		if len(tc.got) > 63 {
			t.Errorf("%q is longer than 63", tc.got)
		}
	}
}

// TestGoldenFlowLogs renders the scenarios with flow logs on: every
// verdict is logged before it is carried out (golden files), the output
// of a caching Renderer equals Render's, and without flow logs no rule
// logs.
func TestGoldenFlowLogs(t *testing.T) {
	cfg := rules.DefaultConfig()
	cfg.FlowLogs = true
	for _, sc := range []struct {
		name string
		objs []any
	}{{"scenario", ct.Scenario()}, {"matching", matchingScenario()}} {
		res, delta := ct.Load(ct.Node, sc.objs).Flush()
		for _, v := range []int{4, 6} {
			t.Run(fmt.Sprintf("%s-v%d", sc.name, v), func(t *testing.T) {
				rs := rules.NewRenderer(cfg, v).RenderChanges(res, delta)
				text := rs.RestoreText()
				golden(t, fmt.Sprintf("%s-flowlogs-v%d.iptables", sc.name, v), text)
				if plain := rules.Render(cfg, calc.Compute(ct.Input(ct.Node, sc.objs)), v).RestoreText(); plain != text {
					t.Errorf("Render of Compute differs from RenderChanges")
				}
				checkEveryVerdictLogged(t, rs)
				if off := rules.Render(rules.DefaultConfig(), res, v).RestoreText(); strings.Contains(off, "NFLOG") {
					t.Errorf("flow logs off renders NFLOG")
				}
			})
		}
	}
}

// checkEveryVerdictLogged: in the filter table, each DROP of a policy
// or profile verdict, end of tier or no profile comes right after an
// NFLOG of the same match (the deny mark, no pass mark, or nothing), and
// each accept- or pass-mark RETURN of a policy chain right after one.
func checkEveryVerdictLogged(t *testing.T, rs *rules.Ruleset) {
	t.Helper()
	logged := 0
	for _, c := range rs.Chains {
		policy := strings.HasPrefix(c.Name, "cali-p")
		for i, r := range c.Rules {
			verdict := (policy && (r.Action == "-j DROP" || r.Action == "-j RETURN")) ||
				strings.HasPrefix(r.Comment, "End of tier") || r.Comment == "Drop if no profiles matched"
			if !verdict {
				continue
			}
			if i == 0 || c.Rules[i-1].NFLOG.Prefix == "" || c.Rules[i-1].Match != r.Match {
				t.Errorf("%s rule %d (%s %s) is not logged first", c.Name, i, r.Match, r.Action)
				continue
			}
			logged++
		}
	}
	if logged == 0 {
		t.Errorf("no verdict found")
	}
}
