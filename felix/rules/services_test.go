package rules_test

import (
	"slices"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// A services match renders as Calico's: an egress destination matches the
// Service's hash:ip,port set (dst,dst: address and port together), an
// ingress source its hash:net set of addresses; the sets are named from
// Calico's IDs and hold each family's members.
func TestRenderServicesMatch(t *testing.T) {
	w := ct.WEP("prod", "web", ct.Node, "cali1111", "10.65.0.1", map[string]string{"app": "web"})
	np := ct.NP("prod", "svc", ct.Ptr(10.0), "app == 'web'", ct.Both,
		[]v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{Services: &v3.ServiceMatch{Name: "client", Namespace: "dev"}}}},
		[]v3.Rule{{Action: v3.Allow, Destination: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api"}}}})
	api := ct.EndpointSlice("prod", "api-1", "api", []string{"10.65.0.7", "fd00::7"}, ct.SlicePort{Proto: "TCP", Port: 8080}, ct.SlicePort{Proto: "UDP", Port: 53})
	cli := ct.EndpointSlice("dev", "client-1", "client", []string{"10.65.0.9"}, ct.SlicePort{Port: 1})
	in := ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), w, np, api, cli})
	in.FollowsServices = true
	res := calc.Compute(in)
	rs := rules.Render(rules.DefaultConfig(), res, 4)

	id := calc.PolicyID{Tier: "default", Namespace: "prod", Name: "svc"}
	dst := rules.IPSetName(4, calc.ServiceSetID(true, "prod/api"))
	if got, want := policyChain(t, rs, rules.PolicyChainName(rules.PrefixPolicyOut, id)),
		"-m set --match-set "+dst+" dst,dst -j MARK --set-xmark 0x10000/0x10000"; !slices.Contains(got, want) {
		t.Errorf("egress chain %q lacks %q", got, want)
	}
	src := rules.IPSetName(4, calc.ServiceSetID(false, "dev/client"))
	if got, want := policyChain(t, rs, rules.PolicyChainName(rules.PrefixPolicyIn, id)),
		"-m set --match-set "+src+" src -j MARK --set-xmark 0x10000/0x10000"; !slices.Contains(got, want) {
		t.Errorf("ingress chain %q lacks %q", got, want)
	}
	sets := map[string]rules.IPSetSpec{}
	for _, s := range rs.IPSets {
		sets[s.Name] = s
	}
	if s := sets[dst]; s.Type != calc.HashIPPort || !slices.Equal(s.Members.Slice(), []string{"10.65.0.7,tcp:8080", "10.65.0.7,udp:53"}) {
		t.Errorf("destination set %s = %+v, want hash:ip,port of the IPv4 endpoint's ports", dst, s)
	}
	if s := sets[src]; s.Type != calc.HashNet || !slices.Equal(s.Members.Slice(), []string{"10.65.0.9/32"}) {
		t.Errorf("source set %s = %+v, want hash:net of the endpoint's address", src, s)
	}
}
