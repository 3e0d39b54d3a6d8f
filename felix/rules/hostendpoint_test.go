package rules_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// chainText returns chain name of chains as "match action" lines, nil if
// absent.
func chainText(chains []rules.Chain, name string) []string {
	i := slices.IndexFunc(chains, func(c rules.Chain) bool { return c.Name == name })
	if i < 0 {
		return nil
	}
	out := []string{}
	for _, r := range chains[i].Rules {
		out = append(out, strings.TrimSpace(r.Match+" "+r.Action))
	}
	return out
}

func has(lines []string, sub string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, sub) })
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func policyChains(chains []rules.Chain) []string {
	var out []string
	for _, c := range chains {
		if strings.HasPrefix(c.Name, rules.PrefixPolicyIn) || strings.HasPrefix(c.Name, rules.PrefixPolicyOut) {
			out = append(out, c.Name)
		}
	}
	return out
}

// TestHostEndpointVariants checks the shape of each of Calico's host
// endpoint chain variants over the scenario (eth0: normal, applyOnForward,
// preDNAT and doNotTrack policies; "*": normal policy only).
func TestHostEndpointVariants(t *testing.T) {
	res := calc.Compute(ct.Input(ct.Node, ct.Scenario()))
	rs := rules.Render(rules.DefaultConfig(), res, 4)
	filter := rs.Chains
	pol := func(prefix, name string) string {
		return rules.PolicyChainName(prefix, calc.PolicyID{Tier: "default", Name: name})
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"forward chain with applyOnForward policy: policy, end-of-tier drop",
			has(chainText(filter, "cali-fhfw-eth0"), "-j "+pol(rules.PrefixPolicyIn, "host.forward-web")) &&
				has(chainText(filter, "cali-fhfw-eth0"), "-j DROP") &&
				!has(chainText(filter, "cali-fhfw-eth0"), "failsafe")},
		{"forward chain without policy accepts by default",
			slices.Equal(chainText(filter, "cali-fhfw-any")[3:], []string{"-j MARK --set-xmark 0x10000/0x10000", "-j RETURN"})},
		{"forward egress chain uses the egress policy chain",
			has(chainText(filter, "cali-thfw-eth0"), "-j "+pol(rules.PrefixPolicyOut, "host.forward-web"))},
		{"normal host chain includes applyOnForward policy too",
			has(chainText(filter, "cali-fh-eth0"), "-j "+pol(rules.PrefixPolicyIn, "host.forward-web"))},
		{"normal host chain excludes preDNAT and untracked policies",
			!has(chainText(filter, "cali-fh-eth0"), pol(rules.PrefixPolicyIn, "host.prednat-block")) &&
				!has(chainText(filter, "cali-fh-eth0"), pol(rules.PrefixPolicyIn, "host.untracked-dns"))},
		{"FORWARD skips incoming forward policy for already-accepted packets",
			has(chainText(filter, "cali-FORWARD"), "-m mark --mark 0x0/0x10000 -j cali-from-hep-forward")},
		{"INPUT and OUTPUT accept what raw or mangle accepted",
			has(chainText(filter, "cali-INPUT"), "-m mark --mark 0x10000/0x10000 -j ACCEPT") &&
				chainText(filter, "cali-OUTPUT")[0] == "-m mark --mark 0x10000/0x10000 -j ACCEPT"},
		{"mangle: preDNAT chain with failsafe, no end-of-tier drop, no profiles",
			has(chainText(rs.Mangle.Chains, "cali-fh-eth0"), "-j cali-failsafe-in") &&
				has(chainText(rs.Mangle.Chains, "cali-fh-eth0"), "-j "+pol(rules.PrefixPolicyIn, "host.prednat-block")) &&
				!has(chainText(rs.Mangle.Chains, "cali-fh-eth0"), "-m mark --mark 0x0/0x20000 -j DROP") &&
				!has(chainText(rs.Mangle.Chains, "cali-fh-eth0"), "cali-pri-")},
		{"mangle: policy chain denies with DROP",
			has(chainText(rs.Mangle.Chains, pol(rules.PrefixPolicyIn, "host.prednat-block")), "-s 198.51.100.0/24 -j DROP")},
		{"mangle holds the preDNAT policy's ingress chain and the host egress policy's egress chain (no unused direction), raw only the untracked one's",
			slices.Equal(policyChains(rs.Mangle.Chains), sorted(pol(rules.PrefixPolicyIn, "host.prednat-block"),
				pol(rules.PrefixPolicyOut, "host.forward-web"))) &&
				slices.Equal(policyChains(rs.Raw.Chains), []string{pol(rules.PrefixPolicyIn, "host.untracked-dns"), pol(rules.PrefixPolicyOut, "host.untracked-dns")})},
		{"raw: untracked chains track no state and NOTRACK what they allow",
			!has(chainText(rs.Raw.Chains, "cali-fh-eth0"), "conntrack") &&
				has(chainText(rs.Raw.Chains, "cali-fh-eth0"), "-j NOTRACK") &&
				has(chainText(rs.Raw.Chains, "cali-th-eth0"), "-j NOTRACK")},
		{"raw: failsafe lets the replies of failsafe connections through",
			has(chainText(rs.Raw.Chains, "cali-failsafe-in"), "--sports 53") &&
				has(chainText(rs.Raw.Chains, "cali-failsafe-out"), "--sports 22")},
		{"raw: no chains for the all-interfaces host endpoint",
			chainText(rs.Raw.Chains, "cali-fh-any") == nil && !has(chainText(rs.Raw.Chains, "cali-from-host-endpoint"), "any")},
		{"raw and mangle hooks",
			slices.Equal(rs.Raw.Hooks, []rules.Hook{{Base: "OUTPUT", Target: "cali-OUTPUT"}, {Base: "PREROUTING", Target: "cali-PREROUTING"}}) &&
				slices.Equal(rs.Mangle.Hooks, []rules.Hook{{Base: "POSTROUTING", Target: "cali-POSTROUTING"}, {Base: "PREROUTING", Target: "cali-PREROUTING"}})},
		{"DNAT'd host traffic: filter OUTPUT skips it, mangle POSTROUTING polices it",
			has(chainText(filter, "cali-OUTPUT"), "-m conntrack ! --ctstate DNAT -j cali-to-host-endpoint") &&
				has(chainText(rs.Mangle.Chains, "cali-POSTROUTING"), "-m conntrack --ctstate DNAT -j cali-to-host-endpoint") &&
				chainText(rs.Mangle.Chains, "cali-POSTROUTING")[0] == "-m mark --mark 0x10000/0x10000 -j RETURN"},
		{"FORWARD marks what it let through as forwarded",
			slices.Equal(chainText(filter, "cali-FORWARD")[len(chainText(filter, "cali-FORWARD"))-1:], []string{"-j MARK --set-xmark 0x10000/0x10000"})},
		{"mangle egress chain: established returns marked, policy, profiles, drop",
			slices.Equal(chainText(rs.Mangle.Chains, "cali-th-eth0")[:4], []string{
				"-m conntrack --ctstate RELATED,ESTABLISHED -j MARK --set-xmark 0x10000/0x10000",
				"-m conntrack --ctstate RELATED,ESTABLISHED -j RETURN",
				"-m conntrack --ctstate INVALID -j DROP", "-j cali-failsafe-out"}) &&
				has(chainText(rs.Mangle.Chains, "cali-th-eth0"), "-j "+pol(rules.PrefixPolicyOut, "host.forward-web")) &&
				chainText(rs.Mangle.Chains, "cali-th-any") != nil},
		{"mangle to-host dispatch skips workloads and lo for *",
			slices.Equal(chainText(rs.Mangle.Chains, "cali-to-host-endpoint"), []string{"-o eth0 -g cali-th-eth0", "-o cali+ -j RETURN", "-o lo -j RETURN", "-g cali-th-any"})},
		{"*: every other interface but lo goes to the any chains",
			slices.Equal(chainText(filter, "cali-from-host-endpoint"), []string{"-i eth0 -g cali-fh-eth0", "-i lo -j RETURN", "-g cali-fh-any"})},
		{"*: forward dispatch skips workload interfaces",
			slices.Equal(chainText(filter, "cali-to-hep-forward"), []string{"-o eth0 -g cali-thfw-eth0", "-o cali+ -j RETURN", "-g cali-thfw-any"})},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: not so; rendered:\n%s", tt.name, rs.RestoreText())
			return
		}
	}
}

// TestHostEndpointByExpectedIPs: a host endpoint without interface name
// takes the interfaces holding one of its IPs, unless a named host
// endpoint has the interface or it is a workload's; without the
// interface list it is not rendered.
func TestHostEndpointByExpectedIPs(t *testing.T) {
	a := ct.HEP("a-by-ip", ct.Node, "", map[string]string{"role": "x"}, "192.168.1.1", "10.65.0.9")
	b := ct.HEP("b-by-ip", ct.Node, "", map[string]string{"role": "x"}, "192.168.1.1", "192.168.3.1")
	a.Spec.Profiles, b.Spec.Profiles = []string{"kns.a"}, []string{"kns.b"}
	objs := []any{
		a, b, ct.NSProfile("a", nil), ct.NSProfile("b", nil),
		ct.HEP("named", ct.Node, "eth2", map[string]string{"role": "x"}),
		ct.GNP("p", "default", nil, "role == 'x'", ct.Ingress, []v3.Rule{{Action: v3.Allow}}, nil),
	}
	res := calc.Compute(ct.Input(ct.Node, objs))
	addr := netip.MustParseAddr
	cfg := rules.DefaultConfig()
	cfg.HostInterfaces = map[string][]netip.Addr{
		"eth1":     {addr("192.168.1.1"), addr("fd00::1")},
		"eth2":     {addr("192.168.2.1"), addr("192.168.3.1")},
		"eth3":     {addr("192.168.3.1")},
		"cali1234": {addr("10.65.0.9")},
		"lo":       {addr("127.0.0.1")},
	}
	chains := rules.Render(cfg, res, 4).Chains
	got := chainText(chains, "cali-from-host-endpoint")
	want := []string{"-i eth1 -g cali-fh-eth1", "-i eth2 -g cali-fh-eth2", "-i eth3 -g cali-fh-eth3"}
	if !slices.Equal(got, want) {
		t.Errorf("dispatch = %q, want %q", got, want)
	}
	// eth1 (both match) is a-by-ip's, the first by name; eth3 b-by-ip's.
	if !has(chainText(chains, "cali-fh-eth1"), "-j cali-pri-kns.a") || !has(chainText(chains, "cali-fh-eth3"), "-j cali-pri-kns.b") {
		t.Errorf("eth1 should be a-by-ip's and eth3 b-by-ip's:\n%q\n%q", chainText(chains, "cali-fh-eth1"), chainText(chains, "cali-fh-eth3"))
	}
	// Which endpoint took which interface: rendered alone (without the
	// named one), each takes every interface holding one of its IPs.
	for _, tc := range []struct {
		hep  string
		want []string
	}{{"a-by-ip", []string{"-i eth1 -g cali-fh-eth1"}}, {"b-by-ip", []string{"-i eth1 -g cali-fh-eth1", "-i eth2 -g cali-fh-eth2", "-i eth3 -g cali-fh-eth3"}}} {
		var only []any
		for _, o := range objs {
			if h, ok := o.(*v3.HostEndpoint); !ok || h.Name == tc.hep {
				only = append(only, o)
			}
		}
		r := calc.Compute(ct.Input(ct.Node, only))
		if got := chainText(rules.Render(cfg, r, 4).Chains, "cali-from-host-endpoint"); !slices.Equal(got, tc.want) {
			t.Errorf("%s alone: dispatch = %q, want %q", tc.hep, got, tc.want)
		}
	}
	if got := chainText(rules.Render(rules.DefaultConfig(), res, 4).Chains, "cali-from-host-endpoint"); !slices.Equal(got, []string{"-i eth2 -g cali-fh-eth2"}) {
		t.Errorf("without the interface list: dispatch = %q, want the named endpoint only", got)
	}
}
