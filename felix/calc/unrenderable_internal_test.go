package calc

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Validation refuses these rules before calc sees them; convertRules must
// still never fail open if one gets through. For each broken part and
// each action: an Allow is dropped, a Deny keeps the rest of its matches,
// anything else denies what reaches it.
func TestConvertRulesNeverFailsOpen(t *testing.T) {
	tcp := numorstring.ProtocolFromString("TCP")
	icmp := numorstring.ProtocolFromString("ICMP")
	badProto := numorstring.ProtocolFromString("no-such-protocol")
	six, five := 6, 5
	code := 3
	port80 := []numorstring.Port{{MinPort: 80, MaxPort: 80}}
	web := v3.EntityRule{Selector: "app == 'web'"}
	cases := []struct {
		name   string
		rule   v3.Rule
		reason string
		// widened is the Deny the rule becomes, with the unrenderable
		// part left out (Action set by the test).
		widened Rule
	}{
		{"ipVersion 5", v3.Rule{IPVersion: &five, Protocol: &tcp}, ReasonIPVersion, Rule{Protocol: 6}},
		{"unknown protocol", v3.Rule{Protocol: &badProto, Destination: v3.EntityRule{Ports: port80}}, ReasonProtocol, Rule{}},
		{"ICMP protocol against ipVersion 6", v3.Rule{IPVersion: &six, Protocol: &icmp, ICMP: &v3.ICMPFields{Type: &code}}, ReasonProtocol, Rule{IPVersion: 6}},
		{"icmp code without type", v3.Rule{Protocol: &icmp, ICMP: &v3.ICMPFields{Code: &code}}, ReasonICMP, Rule{IPVersion: 4, Protocol: 1}},
		{"bad net", v3.Rule{Protocol: &tcp, Source: v3.EntityRule{Nets: []string{"10.0.0.0/8", "not-a-net"}}}, ReasonNets, Rule{Protocol: 6}},
		{"bad selector", v3.Rule{Source: v3.EntityRule{Selector: "app ==", Nets: []string{"10.0.0.0/8"}}}, ReasonSelector,
			Rule{Src: EntityMatch{Nets: mustNets(t, "10.0.0.0/8")}}},
		{"ports without protocol", v3.Rule{Destination: v3.EntityRule{Ports: port80}}, ReasonPorts, Rule{}},
		{"services", v3.Rule{Protocol: &tcp, Source: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api"}}}, ReasonServices, Rule{Protocol: 6}},
		{"http", v3.Rule{Protocol: &tcp, HTTP: &v3.HTTPMatch{Methods: []string{"GET"}}, Source: web}, ReasonHTTP,
			Rule{Protocol: 6, Src: EntityMatch{SelSet: mustMatcher(t, "app == 'web'").id}}},
	}
	ok := v3.Rule{Action: v3.Allow, Protocol: &tcp, Destination: v3.EntityRule{Ports: port80}}
	okRule := Rule{Action: v3.Allow, Index: 1, Protocol: 6, Dst: EntityMatch{Ports: []PortRange{{80, 80}}, HasPortConstraint: true}}
	for _, tc := range cases {
		for _, action := range []v3.Action{v3.Allow, v3.Deny, v3.Pass, v3.Log, "Bogus"} {
			t.Run(tc.name+"/"+string(action), func(t *testing.T) {
				rule := tc.rule
				rule.Action = action
				demands := map[string]*demand{}
				got, bad := convertRules([]v3.Rule{rule, ok}, "", ruleOwner{"GlobalNetworkPolicy", "", "p", "ingress"}, false, demands)
				var want []Rule
				wantHandling := Denied
				switch action {
				case v3.Allow:
					wantHandling = Dropped
				case v3.Deny:
					wantHandling = Widened
					w := tc.widened
					w.Action = v3.Deny
					want = append(want, w)
				default:
					want = append(want, Rule{Action: v3.Deny, IPVersion: tc.widened.IPVersion})
				}
				want = append(want, okRule)
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
					t.Errorf("rules (-want +got):\n%s", diff)
				}
				reasons := map[string]bool{}
				for _, u := range bad {
					if u.Handling != wantHandling || u.Rule != 0 || u.Name != "p" || u.Direction != "ingress" {
						t.Errorf("report %+v: want handling %s for rule 0 of p ingress", u, wantHandling)
					}
					reasons[u.Reason] = true
				}
				if !reasons[tc.reason] {
					t.Errorf("reports %v lack reason %s", bad, tc.reason)
				}
				if action == "Bogus" && !reasons[ReasonAction] {
					t.Errorf("reports %v lack reason %s", bad, ReasonAction)
				}
				// Every set the kept rules reference is registered, and
				// a dropped rule's are not.
				for _, r := range got {
					for _, id := range []string{r.Src.SelSet, r.Src.NetSet, r.Dst.SelSet} {
						if id != "" && demands[id] == nil {
							t.Errorf("set %s referenced but not registered", id)
						}
					}
				}
				if action == v3.Allow && len(demands) != 0 {
					t.Errorf("dropped rule registered sets %v", demands)
				}
			})
		}
	}
}

// A policy whose own selector cannot be parsed (validation should have
// refused it) cannot be bounded: it selects every endpoint of its
// namespace and denies their traffic in its directions.
func TestPolicyWithBadSelectorDeniesItsNamespace(t *testing.T) {
	p, unrenderable := parsePolicy(policySpec{kind: v3.KindNetworkPolicy, ns: "prod", name: "p", tier: "default",
		sel: "app ==", types: []v3.PolicyType{v3.PolicyTypeEgress},
		in: []v3.Rule{{Action: v3.Allow}}, out: []v3.Rule{{Action: v3.Allow}}}, false)
	if p == nil {
		t.Fatal("policy skipped")
	}
	if p.ingress || !p.egress {
		t.Errorf("directions ingress=%v egress=%v, want its types (egress)", p.ingress, p.egress)
	}
	if diff := cmp.Diff([]Rule{{Action: v3.Deny}}, p.out); diff != "" {
		t.Errorf("egress rules (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"projectcalico.org/namespace": "prod", "app": "x"}, true},
		{map[string]string{"projectcalico.org/namespace": "dev", "app": "x"}, false},
	} {
		if got := p.sel.matches(tc.labels); got != tc.want {
			t.Errorf("selects %v = %v, want %v", tc.labels, got, tc.want)
		}
	}
	want := []Unrenderable{{Kind: v3.KindNetworkPolicy, Namespace: "prod", Name: "p", Rule: -1,
		Handling: Denied, Reason: ReasonPolicySelector}}
	if diff := cmp.Diff(want, unrenderable, cmpopts.IgnoreFields(Unrenderable{}, "Detail")); diff != "" {
		t.Errorf("unrenderable (-want +got):\n%s", diff)
	}
}

func mustNets(t *testing.T, ss ...string) []netip.Prefix {
	t.Helper()
	n, err := parseNets(ss)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustMatcher(t *testing.T, sel string) *matcher {
	t.Helper()
	m, err := newMatcher(sel, "", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
