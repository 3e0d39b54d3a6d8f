package rules_test

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// A ClusterNetworkPolicy denying egress to networks of both IP versions
// (network-policy-api conformance's inline-cidr-as-peers-example) converts,
// as Calico's, to one rule with IPv4 and IPv6 nets: felix enforces it with
// each version's nets in that version's chain. (Found by the conformance
// suite: felix used to refuse the whole policy as bad input, so the Deny
// was not enforced.)
func TestRenderMixedFamilyNets(t *testing.T) {
	cnp := &cnpv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "inline-cidr"},
		Spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 85,
			Subject: cnpv1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
			Egress: []cnpv1.ClusterNetworkPolicyEgressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny,
				To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1.CIDR{"0.0.0.0/0", "::/0"}}}}}}}
	gnp, err := kdd.K8sClusterNetworkPolicyToCalico(cnp)
	if err != nil {
		t.Fatal(err)
	}
	w := ct.WEP("prod", "web", ct.Node, "cali1111", "10.65.0.1", map[string]string{"app": "web"})
	w.Spec.IPNetworks = append(w.Spec.IPNetworks, "fd00::1/128")
	in := ct.Input(ct.Node, []any{ct.NSProfile("prod", map[string]string{"team": "a"}), w, gnp,
		ct.Tier("kube-admin", 1000, v3.Pass)})
	res := calc.Compute(in)
	if len(res.Problems) != 0 {
		t.Fatalf("the converted policy is bad input: %+v", res.Problems)
	}
	id := calc.PolicyID{Tier: "kube-admin", Name: gnp.Name}
	for v, want := range map[int]string{4: "-d 0.0.0.0/0 -j DROP", 6: "-d ::/0 -j DROP"} {
		rs := rules.Render(rules.DefaultConfig(), res, v)
		if got := policyChain(t, rs, rules.PolicyChainName(rules.PrefixPolicyOut, id)); !slices.ContainsFunc(got, func(r string) bool { return r == want }) {
			t.Errorf("IPv%d egress chain %q lacks %q", v, got, want)
		}
	}
}
