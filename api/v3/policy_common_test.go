package v3

import (
	"strings"
	"testing"

	"github.com/tabbynet/tabby/api/numorstring"
)

func polProto(s string) *numorstring.Protocol {
	p := numorstring.ProtocolFromString(s)
	return &p
}

func polProtoNum(n uint8) *numorstring.Protocol {
	p := numorstring.ProtocolFromInt(n)
	return &p
}

func polInt(i int) *int { return &i }

func polPorts(t *testing.T, ss ...string) []numorstring.Port {
	t.Helper()
	var out []numorstring.Port
	for _, s := range ss {
		p, err := numorstring.PortFromString(s)
		if err != nil {
			t.Fatalf("PortFromString(%q): %v", s, err)
		}
		out = append(out, p)
	}
	return out
}

// polCheckErrs fails unless errs is empty (want == "") or some error
// contains want.
func polCheckErrs(t *testing.T, errs ErrorList, want string) {
	t.Helper()
	if want == "" {
		if len(errs) != 0 {
			t.Fatalf("want no errors, got: %v", errs)
		}
		return
	}
	if !strings.Contains(errs.Error(), want) {
		t.Fatalf("want an error containing %q, got: %v", want, errs.Err())
	}
}

func TestPolicyRuleValidation(t *testing.T) {
	ingress := polRuleScope{inPolicy: true}
	egress := polRuleScope{inPolicy: true, egress: true}
	globalEgress := polRuleScope{inPolicy: true, egress: true, global: true}
	profileEgress := polRuleScope{egress: true}

	tests := []struct {
		name  string
		rule  Rule
		scope polRuleScope
		want  string // "" means valid
	}{
		{"minimal allow", Rule{Action: Allow}, ingress, ""},
		{"numbered TCP supports ports",
			Rule{Action: Allow, Protocol: polProtoNum(6), Destination: EntityRule{Ports: polPorts(t, "80")}}, ingress, ""},
		{"UDPLite ports are read (refused on write: WriteRules)",
			Rule{Action: Allow, Protocol: polProto("UDPLite"), Destination: EntityRule{Ports: polPorts(t, "5000:5010")}}, ingress, ""},
		{"named port in source is accepted, as in Calico",
			Rule{Action: Allow, Protocol: polProto("TCP"), Source: EntityRule{Ports: polPorts(t, "metrics")}}, ingress, ""},
		{"GRE has no ports",
			Rule{Action: Allow, Protocol: polProtoNum(47), Destination: EntityRule{NotPorts: polPorts(t, "80")}}, ingress,
			"x.destination.notPorts: rules that specify ports must set protocol to TCP or UDP or SCTP (protocol is 47)"},
		{"range starting at 0",
			Rule{Action: Allow, Protocol: polProto("TCP"), Destination: EntityRule{Ports: polPorts(t, "0:10")}}, ingress,
			"x.destination.ports[0]: port 0:10 is not allowed"},
		{"inverted range built in code",
			Rule{Action: Allow, Protocol: polProto("TCP"), Destination: EntityRule{Ports: []numorstring.Port{{MinPort: 9, MaxPort: 1}}}}, ingress,
			"port range 9:1 has its minimum above its maximum"},
		{"numbered ICMP counts as ICMP",
			Rule{Action: Allow, Protocol: polProtoNum(1), ICMP: &ICMPFields{Type: polInt(8)}, IPVersion: polInt(4)}, ingress, ""},
		{"numbered ICMPv6 fixes the IP version",
			Rule{Action: Allow, Protocol: polProtoNum(58), IPVersion: polInt(4)}, ingress, "x.ipVersion: 4 does not fit protocol 58"},
		{"ICMP type 0 and code 0 are valid",
			Rule{Action: Allow, Protocol: polProto("ICMP"), ICMP: &ICMPFields{Type: polInt(0), Code: polInt(0)}}, ingress, ""},
		{"negative ICMP type",
			Rule{Action: Allow, Protocol: polProto("ICMP"), ICMP: &ICMPFields{Type: polInt(-1)}}, ingress, "x.icmp.type: -1 is outside 0-254"},
		{"IPv6 nets with ipVersion 6",
			Rule{Action: Allow, IPVersion: polInt(6), Source: EntityRule{Nets: []string{"fd00::1/128", "fd00:2::/64"}}}, ingress, ""},
		{"IPv4 source and IPv6 destination in one rule are read (refused on write: WriteRules)",
			Rule{Action: Allow, Source: EntityRule{Nets: []string{"10.0.0.0/8"}}, Destination: EntityRule{Nets: []string{"fd00::/8"}}}, ingress, ""},
		{"HTTP with numbered TCP",
			Rule{Action: Allow, Protocol: polProtoNum(6), HTTP: &HTTPMatch{Methods: []string{"GET"}}}, ingress, ""},
		{"HTTP path with a query",
			Rule{Action: Allow, HTTP: &HTTPMatch{Paths: []HTTPPath{{Exact: "/a?b=c"}}}}, ingress, `x.http.paths[0].exact: "/a?b=c" is not a valid path`},
		{"HTTP in a profile's egress rule is allowed (Calico checks direction only in policies)",
			Rule{Action: Allow, HTTP: &HTTPMatch{Methods: []string{"GET"}}}, profileEgress, ""},
		{"HTTP in a policy's egress rule",
			Rule{Action: Allow, HTTP: &HTTPMatch{Methods: []string{"GET"}}}, egress, "x.http: HTTP matches are not allowed in egress rules"},
		{"service in egress destination without namespace in a namespaced policy",
			Rule{Action: Allow, Destination: EntityRule{Services: &ServiceMatch{Name: "api"}}}, egress, ""},
		{"service in egress destination without namespace in a global policy",
			Rule{Action: Allow, Destination: EntityRule{Services: &ServiceMatch{Name: "api"}}}, globalEgress,
			"x.destination.services.namespace: is required in a GlobalNetworkPolicy"},
		{"service with notPorts in the destination",
			Rule{Action: Allow, Protocol: polProto("TCP"), Destination: EntityRule{Services: &ServiceMatch{Name: "api"}, NotPorts: polPorts(t, "22")}}, egress,
			"x.destination.notPorts: cannot be combined with destination.services"},
		{"service in the ingress source with ports",
			Rule{Action: Allow, Protocol: polProto("TCP"), Source: EntityRule{Services: &ServiceMatch{Name: "lb", Namespace: "edge"}, Ports: polPorts(t, "443")}}, ingress, ""},
		{"service with an invalid name",
			Rule{Action: Allow, Source: EntityRule{Services: &ServiceMatch{Name: "Bad_Name"}}}, ingress, `x.source.services.name: "Bad_Name" is not a valid name`},
		{"service with serviceAccounts",
			Rule{Action: Allow, Source: EntityRule{Services: &ServiceMatch{Name: "lb"}, ServiceAccounts: &ServiceAccountMatch{Names: []string{"x"}}}}, ingress,
			"x.source.services: cannot be combined with serviceAccounts"},
		{"service with namespaceSelector",
			Rule{Action: Allow, Source: EntityRule{Services: &ServiceMatch{Name: "lb"}, NamespaceSelector: "all()"}}, ingress,
			"x.source.services: cannot be combined with namespaceSelector"},
		{"namespaceSelector global() with spaces",
			Rule{Action: Allow, Source: EntityRule{NamespaceSelector: " global( ) ", Selector: "role == 'db'"}}, ingress, ""},
		{"notSelector parses",
			Rule{Action: Allow, Source: EntityRule{NotSelector: "a ==="}}, ingress, "x.source.notSelector: invalid selector"},
		{"overlong selector",
			Rule{Action: Allow, Source: EntityRule{Selector: "has(" + strings.Repeat("a", 1100) + ")"}}, ingress,
			"x.source.selector: selector is 1105 characters long, more than the 1024 allowed"},
		{"annotations too large",
			Rule{Action: Allow, Metadata: &RuleMetadata{Annotations: map[string]string{"k": strings.Repeat("v", 300*1024)}}}, ingress,
			"x.metadata.annotations: annotations total"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			polCheckErrs(t, tc.rule.validate("x", tc.scope), tc.want)
		})
	}
}

func TestPolicyRuleLimits(t *testing.T) {
	many := make([]string, 257)
	for i := range many {
		many[i] = "10.0.0.1"
	}
	r := Rule{Action: Allow, Source: EntityRule{Nets: many}}
	polCheckErrs(t, r.validate("x", polRuleScope{}), "x.source.nets: has 257 entries, more than the 256 allowed")

	rules := make([]Rule, 1025)
	for i := range rules {
		rules[i] = Rule{Action: Allow}
	}
	p := &Profile{ObjectMeta: polMeta("big", ""), Spec: ProfileSpec{Ingress: rules}}
	polCheckErrs(t, p.Validate(), "spec.ingress: has 1025 rules, more than the 1024 allowed")
}
