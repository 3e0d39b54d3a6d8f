package rules_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got), rerun with -update if intended:\n%s", name, diff)
	}
}

// matchingScenario exercises every match kind in one GlobalNetworkPolicy.
func matchingScenario() []any {
	var many []numorstring.Port
	for i := range 12 {
		many = append(many, numorstring.SinglePort(uint16(1000+i)))
	}
	many = append(many, ct.Ports("2000:2010", "3000:3010", "http")...)
	w := ct.WEP("prod", "web", ct.Node, "cali1111", "10.65.0.1", map[string]string{"app": "web"})
	w.Spec.IPNetworks = append(w.Spec.IPNetworks, "fd00::1/128")
	w.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080}}
	return []any{
		ct.NSProfile("prod", nil), w,
		ct.GNP("matching", "default", ct.Ptr(1.0), "app == 'web'", ct.Both, []v3.Rule{
			{Action: v3.Allow, Protocol: ct.Proto("TCP"), Source: v3.EntityRule{
				Nets: []string{"10.0.0.0/8", "11.0.0.0/8"}, NotNets: []string{"10.1.0.0/16", "10.2.0.0/16"},
				NotSelector: "app == 'bad'"},
				Destination: v3.EntityRule{Ports: many, NotPorts: many[:3]}},
			{Action: v3.Deny, NotProtocol: ct.Proto("UDP"), Source: v3.EntityRule{Nets: []string{"192.168.0.0/16"}}},
			{Action: v3.Allow, Protocol: ct.Proto("ICMP"), ICMP: &v3.ICMPFields{Type: ct.Ptr(8), Code: ct.Ptr(0)}},
			{Action: v3.Deny, Protocol: ct.Proto("ICMPv6"), NotICMP: &v3.ICMPFields{Type: ct.Ptr(128)}},
			{Action: v3.Log, IPVersion: ct.Ptr(6)},
			{Action: v3.Deny, Source: v3.EntityRule{Nets: []string{"fd00:1::/64"}, NotNets: []string{"fd00:1::1/128"}}},
			{Action: v3.Pass, Protocol: ct.Proto("UDP"), Source: v3.EntityRule{Ports: ct.Ports("53"), NotPorts: ct.Ports("http")}},
		}, []v3.Rule{
			{Action: v3.Allow, Protocol: ct.Proto("SCTP"), Destination: v3.EntityRule{Selector: "app == 'web'", Ports: ct.Ports("http", "7")}},
		}),
	}
}

// TestGolden renders the Engine's first Result of each scenario through a
// Renderer's RenderChanges, as the daemon does, and checks the text
// against the golden files and against a plain Render of Compute.
func TestGolden(t *testing.T) {
	for _, sc := range []struct {
		name string
		objs []any
	}{{"scenario", ct.Scenario()}, {"matching", matchingScenario()}} {
		res, delta := ct.Load(ct.Node, sc.objs).Flush()
		if sc.name == "matching" && len(res.Problems) > 0 {
			t.Fatalf("matching scenario has problems: %v", res.Problems)
		}
		for _, v := range []int{4, 6} {
			t.Run(fmt.Sprintf("%s-v%d", sc.name, v), func(t *testing.T) {
				rs := rules.NewRenderer(rules.DefaultConfig(), v).RenderChanges(res, delta)
				golden(t, fmt.Sprintf("%s-v%d.iptables", sc.name, v), rs.RestoreText())
				golden(t, fmt.Sprintf("%s-v%d.ipset", sc.name, v), rs.IPSetRestoreText())
				plain := rules.Render(rules.DefaultConfig(), calc.Compute(ct.Input(ct.Node, sc.objs)), v)
				if diff := cmp.Diff(plain.RestoreText(), rs.RestoreText()); diff != "" {
					t.Errorf("Render of Compute differs (-compute +engine):\n%s", diff)
				}
			})
		}
	}
}

// TestDeterministic: Engines fed the same objects in different orders
// render the same text.
func TestDeterministic(t *testing.T) {
	objs := ct.Scenario()
	render := func(objs []any) string {
		res, delta := ct.Load(ct.Node, objs).Flush()
		return rules.NewRenderer(rules.DefaultConfig(), 4).RenderChanges(res, delta).RestoreText()
	}
	a := render(objs)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5 {
		shuffled := slices.Clone(objs)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if b := render(shuffled); a != b {
			t.Fatalf("render differs between runs:\n%s", cmp.Diff(a, b))
		}
	}
}

func TestSplitPorts(t *testing.T) {
	single := func(n int) []calc.PortRange {
		var out []calc.PortRange
		for i := range n {
			out = append(out, calc.PortRange{Min: uint16(i + 1), Max: uint16(i + 1)})
		}
		return out
	}
	rng := calc.PortRange{Min: 100, Max: 200}
	tests := []struct {
		name  string
		in    []calc.PortRange
		sizes []int
	}{
		{"none", nil, nil},
		{"15 singles fit", single(15), []int{15}},
		{"16 singles split", single(16), []int{15, 1}},
		{"ranges count twice", []calc.PortRange{rng, rng, rng, rng, rng, rng, rng, rng}, []int{7, 1}},
		{"single then range that does not fit", append(single(14), rng), []int{14, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sizes []int
			for _, c := range rules.SplitPorts(tt.in) {
				sizes = append(sizes, len(c))
			}
			if diff := cmp.Diff(tt.sizes, sizes); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamesLimited(t *testing.T) {
	long := calc.PolicyID{Tier: "default", Namespace: "a-rather-long-namespace", Name: "and-a-long-policy-name"}
	tests := []struct{ name, got string }{
		{"policy", rules.PolicyChainName(rules.PrefixPolicyIn, long)},
		{"profile", rules.ProfileChainName(rules.PrefixProfileOut, "ksa.a-rather-long-namespace.default")},
	}
	for _, tt := range tests {
		if len(tt.got) > rules.MaxChainNameLength || !strings.HasPrefix(tt.got, "cali-") {
			t.Errorf("%s chain %q: want cali- and at most %d chars", tt.name, tt.got, rules.MaxChainNameLength)
		}
	}
	if got := rules.ProfileChainName(rules.PrefixProfileIn, "kns.prod"); got != "cali-pri-kns.prod" {
		t.Errorf("short profile chain = %q, want it readable", got)
	}
	if n := rules.IPSetName(4, "s:"+strings.Repeat("x", 24)); len(n) != rules.MaxIPSetNameLength || !strings.HasPrefix(n, "cali40s:") {
		t.Errorf("ipset name %q: want cali40s: and %d chars", n, rules.MaxIPSetNameLength)
	}
}

func TestHashesChainAndPosition(t *testing.T) {
	a := rules.Chain{Name: "cali-x", Rules: []rules.Rule{{Action: "-j ACCEPT"}, {Action: "-j DROP"}}}
	b := rules.Chain{Name: "cali-y", Rules: a.Rules}
	c := rules.Chain{Name: "cali-x", Rules: []rules.Rule{{Action: "-j DROP"}, {Action: "-j DROP"}}}
	ha, hb, hc := a.Hashed(), b.Hashed(), c.Hashed()
	if ha[0].Hash == hb[0].Hash {
		t.Error("same rule in different chains has the same hash")
	}
	if ha[1].Hash == hc[1].Hash {
		t.Error("a change to rule 0 did not change rule 1's hash")
	}
	if again := a.Hashed(); again[1] != ha[1] {
		t.Error("hash not stable")
	}
}

// TestRenderChangesMatchesRender feeds a series of changes to an Engine
// and renders each Flush with one caching Renderer per version
// (RenderChanges with the Delta, as the daemon does); each output equals
// a fresh Render of a fresh Compute, and the set versions and changes it
// gives lead from earlier contents to the new ones.
func TestRenderChangesMatchesRender(t *testing.T) {
	objs := ct.Scenario()
	steps := []func([]any) []any{
		func(o []any) []any { return o },
		func(o []any) []any {
			out := append([]any{}, o...)
			for i, x := range out {
				if p, ok := x.(*v3.NetworkPolicy); ok && p.Name == "web-from-dev" {
					q := p.DeepCopy()
					q.Spec.Ingress[0].Destination.Ports = ct.Ports("7000")
					out[i] = q
				}
			}
			return out
		},
		func(o []any) []any { return ct.With(o, matchingScenario()...) },
		func(o []any) []any { return o[5:] },
		func(o []any) []any { return ct.Scenario() },
	}
	h := newEngineHarness(objs)
	for i, step := range steps {
		objs = step(objs)
		h.check(t, fmt.Sprint("step ", i), objs)
	}
}

// TestNoChainForUnusedDirection: an ingress-only policy has a cali-pi-
// chain and no cali-po- chain (nothing would jump to it), an egress-only
// one the reverse; as with Calico.
func TestNoChainForUnusedDirection(t *testing.T) {
	w := ct.WEP("prod", "web", ct.Node, "cali1111", "10.65.0.1", map[string]string{"app": "web"})
	allow := []v3.Rule{{Action: v3.Allow}}
	res := calc.Compute(ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), w,
		ct.GNP("in-only", "default", ct.Ptr(1.0), "app == 'web'", ct.Ingress, allow, nil),
		ct.GNP("out-only", "default", ct.Ptr(2.0), "app == 'web'", ct.Egress, nil, allow),
	}))
	rs := rules.Render(rules.DefaultConfig(), res, 4)
	var names []string
	for _, c := range rs.Chains {
		if strings.HasPrefix(c.Name, rules.PrefixPolicyIn) || strings.HasPrefix(c.Name, rules.PrefixPolicyOut) {
			names = append(names, c.Name)
		}
	}
	in := rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Name: "in-only"})
	out := rules.PolicyChainName(rules.PrefixPolicyOut, calc.PolicyID{Tier: "default", Name: "out-only"})
	slices.Sort(names)
	want := []string{in, out}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("policy chains %v, want only %v", names, want)
	}
}
