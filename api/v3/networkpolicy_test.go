package v3

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func polMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace}
}

func TestPolicyDefaultTypes(t *testing.T) {
	in := []Rule{{Action: Allow}}
	out := []Rule{{Action: Deny}}
	tests := []struct {
		name            string
		ingress, egress []Rule
		types           []PolicyType
		want            []PolicyType
	}{
		{"no rules", nil, nil, nil, []PolicyType{PolicyTypeIngress}},
		{"ingress only", in, nil, nil, []PolicyType{PolicyTypeIngress}},
		{"egress only", nil, out, nil, []PolicyType{PolicyTypeEgress}},
		{"both", in, out, nil, []PolicyType{PolicyTypeIngress, PolicyTypeEgress}},
		{"empty list is filled", in, out, []PolicyType{}, []PolicyType{PolicyTypeIngress, PolicyTypeEgress}},
		{"explicit types are kept", in, out, []PolicyType{PolicyTypeEgress}, []PolicyType{PolicyTypeEgress}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := &NetworkPolicy{ObjectMeta: polMeta("p", "ns"), Spec: NetworkPolicySpec{Ingress: tc.ingress, Egress: tc.egress, Types: tc.types}}
			np.Default()
			if d := cmp.Diff(tc.want, np.Spec.Types); d != "" {
				t.Errorf("NetworkPolicy types (-want +got):\n%s", d)
			}
			gnp := &GlobalNetworkPolicy{ObjectMeta: polMeta("p", ""), Spec: GlobalNetworkPolicySpec{Ingress: tc.ingress, Egress: tc.egress, Types: tc.types}}
			gnp.Default()
			if d := cmp.Diff(tc.want, gnp.Spec.Types); d != "" {
				t.Errorf("GlobalNetworkPolicy types (-want +got):\n%s", d)
			}
		})
	}
}

func TestPolicyDefaultTierAndRulesUntouched(t *testing.T) {
	rules := []Rule{{
		Action:   Allow,
		Protocol: polProto("TCP"),
		Metadata: &RuleMetadata{Annotations: map[string]string{"why": "web"}},
	}}
	np := &NetworkPolicy{ObjectMeta: polMeta("p", "ns"), Spec: NetworkPolicySpec{Ingress: rules}}
	want := np.DeepCopy()
	want.Spec.Tier = DefaultTierName
	want.Spec.Types = []PolicyType{PolicyTypeIngress}
	np.Default()
	if d := cmp.Diff(want, np); d != "" {
		t.Errorf("defaulted NetworkPolicy (-want +got):\n%s", d)
	}

	gnp := &GlobalNetworkPolicy{ObjectMeta: polMeta("p", ""), Spec: GlobalNetworkPolicySpec{Tier: "security"}}
	gnp.Default()
	if gnp.Spec.Tier != "security" {
		t.Errorf("an explicit tier was changed to %q", gnp.Spec.Tier)
	}
}

func TestPolicyNames(t *testing.T) {
	tests := []struct {
		name      string
		namespace bool // NetworkPolicy (true) or GlobalNetworkPolicy
		tier      string
		wantErr   bool
	}{
		{"allow-web", true, "", false},
		// Current Calico no longer requires "<tier>." but still accepts it,
		// and does not check that the prefix matches the tier.
		{"security.allow-web", true, "security", false},
		{"allow-web", true, "security", false},
		{"other.allow-web", true, "security", false},
		{"knp.default.allow.web.v2", true, "", false},
		{"ossg.default.3f2a", true, "", false},
		{"a.b.c", true, "", true},
		{"Allow-Web", true, "", true},
		{"security.allow-web", false, "security", false},
		{"allow-web", false, "", false},
		{"knp.default.allow-web", false, "", true},
		{"a.b.c", false, "", true},
	}
	for _, tc := range tests {
		kind := "GlobalNetworkPolicy"
		if tc.namespace {
			kind = "NetworkPolicy"
		}
		t.Run(kind+"/"+tc.name, func(t *testing.T) {
			var r Resource
			if tc.namespace {
				r = &NetworkPolicy{ObjectMeta: polMeta(tc.name, "ns"), Spec: NetworkPolicySpec{Tier: tc.tier}}
			} else {
				r = &GlobalNetworkPolicy{ObjectMeta: polMeta(tc.name, ""), Spec: GlobalNetworkPolicySpec{Tier: tc.tier}}
			}
			r.Default()
			errs := r.Validate()
			if got := len(errs) != 0; got != tc.wantErr {
				t.Fatalf("errors = %v, want error: %v", errs, tc.wantErr)
			}
		})
	}
}

func TestPolicyTypesNeedNotMatchRules(t *testing.T) {
	// Calico accepts types that omit a direction whose rules are present
	// (so one policy works for old and new Felix alike); so does Tabby.
	np := &NetworkPolicy{ObjectMeta: polMeta("p", "ns"), Spec: NetworkPolicySpec{
		Egress: []Rule{{Action: Allow}},
		Types:  []PolicyType{PolicyTypeIngress},
	}}
	np.Default()
	polCheckErrs(t, np.Validate(), "")
}

func TestGlobalNetworkPolicyForwardingModes(t *testing.T) {
	tests := []struct {
		name                         string
		doNotTrack, preDNAT, forward bool
		egress                       []Rule
		want                         string
	}{
		{"plain", false, false, false, nil, ""},
		{"applyOnForward alone", false, false, true, nil, ""},
		{"doNotTrack", true, false, true, []Rule{{Action: Allow}}, ""},
		{"preDNAT", false, true, true, nil, ""},
		{"doNotTrack without forward", true, false, false, nil, "spec.applyOnForward: must be true"},
		{"both", true, true, true, nil, "spec.preDNAT: preDNAT and doNotTrack cannot both be true"},
		{"preDNAT with egress", false, true, true, []Rule{{Action: Deny}}, "spec.egress: a preDNAT policy cannot have egress rules"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &GlobalNetworkPolicy{ObjectMeta: polMeta("p", ""), Spec: GlobalNetworkPolicySpec{
				DoNotTrack: tc.doNotTrack, PreDNAT: tc.preDNAT, ApplyOnForward: tc.forward, Egress: tc.egress,
			}}
			p.Default()
			polCheckErrs(t, p.Validate(), tc.want)
		})
	}
}
