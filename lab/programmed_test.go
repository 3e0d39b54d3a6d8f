package lab

import (
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/daemon"
)

// TestReportLags: what a node's felix report must show for an apply to
// be in place: each resource written at its version or later (deleted:
// not listed), and on every endpoint a policy applies to, its chains and
// the endpoint's own programmed; a policy that applies to no local
// endpoint needs only to be read.
func TestReportLags(t *testing.T) {
	chain := func(name string, ok bool) daemon.ChainReport {
		return daemon.ChainReport{Table: "filter", Chain: name, RuleHashes: []string{"h1"}, Programmed: ok}
	}
	report := func(version string, polOK, epOK bool) *daemon.Report {
		return &daemon.Report{
			Endpoints: []daemon.EndpointReport{{Kind: "wep", Key: "x/node1-k8s-a-eth0", Interface: "cali1",
				Chains: []daemon.ChainReport{chain("cali-tw-cali1", epOK), chain("cali-fw-cali1", true)},
				Ingress: []daemon.TierReport{{Tier: "default", Policies: []daemon.PolicyReport{
					{Namespace: "x", Name: "knp.default.allow", ChainReport: chain("cali-pi-_abc", polOK)}}}}}},
			Resources: []daemon.ReadVersion{
				{Kind: v3.KindNetworkPolicy, Namespace: "x", Name: "knp.default.allow", ResourceVersion: version},
				{Kind: v3.KindGlobalNetworkPolicy, Name: "elsewhere", ResourceVersion: "7"},
				{Kind: v3.KindHostEndpoint, Name: "node1-eth0", ResourceVersion: "8"},
			}}
	}
	allow := PolicyRef{Kind: v3.KindNetworkPolicy, Namespace: "x", Name: "knp.default.allow", Version: "12"}
	elsewhere := PolicyRef{Kind: v3.KindGlobalNetworkPolicy, Name: "elsewhere", Version: "7"}
	hep := PolicyRef{Kind: v3.KindHostEndpoint, Name: "node1-eth0", Version: "8"}
	for _, tc := range []struct {
		name string
		rep  *daemon.Report
		refs []PolicyRef
		want string // "" or a part of the answer
	}{
		{"programmed", report("12", true, true), []PolicyRef{allow, elsewhere, hep}, ""},
		{"a later version read", report("13", true, true), []PolicyRef{allow}, ""},
		{"an older version", report("11", true, true), []PolicyRef{allow}, "has NetworkPolicy x/knp.default.allow at version 11, not yet 12"},
		{"not read yet", report("12", true, true), []PolicyRef{{Kind: v3.KindGlobalNetworkPolicy, Name: "new", Version: "20"}}, "has not read GlobalNetworkPolicy new yet"},
		{"its chain not programmed", report("12", false, true), []PolicyRef{allow}, "endpoint x/node1-k8s-a-eth0: chain cali-pi-_abc of NetworkPolicy x/knp.default.allow not programmed"},
		{"the endpoint's chain not programmed", report("12", true, false), []PolicyRef{allow}, "chain cali-tw-cali1 of NetworkPolicy x/knp.default.allow not programmed"},
		{"a policy of no local endpoint, read", report("12", false, false), []PolicyRef{elsewhere}, ""},
		{"deleted, still there", report("12", true, true), []PolicyRef{{Kind: v3.KindNetworkPolicy, Namespace: "x", Name: "knp.default.allow", Deleted: true}}, "still has NetworkPolicy x/knp.default.allow"},
		{"deleted, gone", report("12", true, true), []PolicyRef{{Kind: v3.KindGlobalNetworkPolicy, Name: "gone", Deleted: true}}, ""},
		// A GlobalNetworkPolicy is not the namespaced policy of the same name.
		{"another kind, same name", report("12", true, true), []PolicyRef{{Kind: v3.KindGlobalNetworkPolicy, Name: "knp.default.allow", Deleted: true}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reportLags(tc.rep, tc.refs)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("reportLags = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		got, want string
		ok        bool
	}{{"12", "12", true}, {"13", "12", true}, {"9", "12", false}, {"abc", "abc", true}, {"abc", "12", false}} {
		if versionAtLeast(tc.got, tc.want) != tc.ok {
			t.Errorf("versionAtLeast(%q, %q) != %v", tc.got, tc.want, tc.ok)
		}
	}
}
