package v3

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// jsonFields lists the JSON names of a struct type's fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// TestStagedSpecsMirrorEnforced: a staged spec is the enforced spec plus
// stagedAction (as in Calico), so Enforced() must carry every field; this
// fails when a field is added to one and not the other.
func TestStagedSpecsMirrorEnforced(t *testing.T) {
	tests := []struct {
		staged, enforced reflect.Type
	}{
		{reflect.TypeFor[StagedGlobalNetworkPolicySpec](), reflect.TypeFor[GlobalNetworkPolicySpec]()},
		{reflect.TypeFor[StagedNetworkPolicySpec](), reflect.TypeFor[NetworkPolicySpec]()},
		{reflect.TypeFor[StagedKubernetesNetworkPolicySpec](), reflect.TypeFor[networkingv1.NetworkPolicySpec]()},
	}
	for _, tc := range tests {
		want := append(jsonFields(tc.enforced), "stagedAction")
		slices.Sort(want)
		if got := jsonFields(tc.staged); !slices.Equal(got, want) {
			t.Errorf("%s fields %v, want %s's plus stagedAction: %v", tc.staged.Name(), got, tc.enforced.Name(), want)
		}
	}
}

func TestStagedEnforcedCarriesEveryField(t *testing.T) {
	order := 5.0
	sg := &StagedGlobalNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "7", UID: "u"},
		Spec: StagedGlobalNetworkPolicySpec{
			StagedAction: StagedActionSet, Tier: "t", Order: &order, Ingress: []Rule{{Action: Allow}},
			Egress: []Rule{{Action: Deny}}, Selector: "a == 'b'", Types: []PolicyType{PolicyTypeIngress},
			DoNotTrack: true, PreDNAT: true, ApplyOnForward: true, ServiceAccountSelector: "s == 't'",
			NamespaceSelector: "n == 'm'", PerformanceHints: []PolicyPerformanceHint{"AssumeNeededOnEveryNode"},
		},
	}
	_, gnp := sg.Enforced()
	if gnp.ResourceVersion != "" || gnp.UID != "" || gnp.Name != "p" {
		t.Errorf("enforced metadata %+v: want the name, no resourceVersion or UID", gnp.ObjectMeta)
	}
	v := reflect.ValueOf(gnp.Spec)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("GlobalNetworkPolicySpec.%s not carried over", v.Type().Field(i).Name)
		}
	}
	sn := &StagedNetworkPolicy{Spec: StagedNetworkPolicySpec{
		Tier: "t", Order: &order, Ingress: []Rule{{Action: Allow}}, Egress: []Rule{{Action: Deny}},
		Selector: "a == 'b'", Types: []PolicyType{PolicyTypeIngress}, ServiceAccountSelector: "s == 't'",
		PerformanceHints: []PolicyPerformanceHint{"AssumeNeededOnEveryNode"},
	}}
	_, np := sn.Enforced()
	v = reflect.ValueOf(np.Spec)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("NetworkPolicySpec.%s not carried over", v.Type().Field(i).Name)
		}
	}
}

// TestStagedValidation: one case per rule of Calico's staged validators.
func TestStagedValidation(t *testing.T) {
	tcp := func() *networkingv1.NetworkPolicyPort {
		p := corev1.ProtocolTCP
		port := intstr.FromInt32(80)
		return &networkingv1.NetworkPolicyPort{Protocol: &p, Port: &port}
	}
	meta := metav1.ObjectMeta{Name: "p", Namespace: "ns"}
	gmeta := metav1.ObjectMeta{Name: "p"}
	tests := []struct {
		name string
		r    Resource
		want string // "" for valid
	}{
		{"global set", &StagedGlobalNetworkPolicy{ObjectMeta: gmeta, Spec: StagedGlobalNetworkPolicySpec{Selector: "a == 'b'"}}, ""},
		{"global delete with tier only", &StagedGlobalNetworkPolicy{ObjectMeta: gmeta, Spec: StagedGlobalNetworkPolicySpec{StagedAction: StagedActionDelete, Tier: "t"}}, ""},
		{"global delete with a selector", &StagedGlobalNetworkPolicy{ObjectMeta: gmeta, Spec: StagedGlobalNetworkPolicySpec{StagedAction: StagedActionDelete, Selector: "all()"}},
			"spec: with stagedAction Delete, every field except tier must be empty"},
		{"global unknown action", &StagedGlobalNetworkPolicy{ObjectMeta: gmeta, Spec: StagedGlobalNetworkPolicySpec{StagedAction: "Enforce"}},
			`spec.stagedAction: "Enforce" is not one of Set, Delete, Learn, Ignore`},
		{"global name with two dots", &StagedGlobalNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "a.b.c"}},
			`"a.b.c" is not a valid policy name`},
		{"global preDNAT and doNotTrack", &StagedGlobalNetworkPolicy{ObjectMeta: gmeta, Spec: StagedGlobalNetworkPolicySpec{PreDNAT: true, DoNotTrack: true, ApplyOnForward: true}},
			"preDNAT and doNotTrack cannot both be true"},
		{"global bad selector", &StagedGlobalNetworkPolicy{ObjectMeta: gmeta, Spec: StagedGlobalNetworkPolicySpec{Selector: "has (a)"}},
			"spec.selector: invalid selector"},
		{"global global() in selector", &StagedGlobalNetworkPolicy{ObjectMeta: gmeta, Spec: StagedGlobalNetworkPolicySpec{Selector: "global()"}},
			"global() can only be used"},
		{"namespaced set", &StagedNetworkPolicy{ObjectMeta: meta, Spec: StagedNetworkPolicySpec{Selector: "a == 'b'", Ingress: []Rule{{Action: Allow}}}}, ""},
		{"namespaced delete", &StagedNetworkPolicy{ObjectMeta: meta, Spec: StagedNetworkPolicySpec{StagedAction: StagedActionDelete}}, ""},
		{"namespaced delete with rules", &StagedNetworkPolicy{ObjectMeta: meta, Spec: StagedNetworkPolicySpec{StagedAction: StagedActionDelete, Ingress: []Rule{{Action: Allow}}}},
			"spec: with stagedAction Delete, every field except tier must be empty"},
		{"namespaced bad rule", &StagedNetworkPolicy{ObjectMeta: meta, Spec: StagedNetworkPolicySpec{Ingress: []Rule{{Action: "Accept"}}}},
			"spec.ingress[0].action"},
		{"namespaced bad tier", &StagedNetworkPolicy{ObjectMeta: meta, Spec: StagedNetworkPolicySpec{Tier: "Bad.Tier"}},
			"not a valid tier name"},
		{"k8s set", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{*tcp()}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}}, ""},
		{"k8s delete", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{StagedAction: StagedActionDelete}}, ""},
		{"k8s delete with a pod selector", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{
			StagedAction: StagedActionDelete, PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}},
			"spec: with stagedAction Delete, every other field must be empty"},
		{"k8s label value that breaks the selector", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "it's"}}}},
			"spec.podSelector: invalid selector"},
		{"k8s bad protocol", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{
			Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{func() networkingv1.NetworkPolicyPort {
				p := *tcp()
				proto := "ICMP"
				p.Protocol = (*corev1.Protocol)(&proto)
				return p
			}()}}}}},
			`spec.egress[0].ports[0].protocol: "ICMP" is not one of TCP, UDP, SCTP`},
		{"k8s endPort below port", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{
			Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{func() networkingv1.NetworkPolicyPort {
				p := *tcp()
				end := int32(70)
				p.EndPort = &end
				return p
			}()}}}}},
			`spec.ingress[0].ports[0].port: invalid port "80:70"`},
		{"k8s bad policy type", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{"Both"}}},
			`spec.policyTypes[0]: "Both" is not one of Ingress, Egress`},
		{"k8s unparseable ipBlock is dropped, not refused (as Calico)", &StagedKubernetesNetworkPolicy{ObjectMeta: meta, Spec: StagedKubernetesNetworkPolicySpec{
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "nonsense"}}}}}}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := DefaultAndValidate(tc.r)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("want valid, got %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted; want error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestStagedDefaults(t *testing.T) {
	p := &StagedGlobalNetworkPolicy{Spec: StagedGlobalNetworkPolicySpec{Egress: []Rule{{Action: Allow}}}}
	p.Default()
	if p.Spec.StagedAction != StagedActionSet || p.Spec.Tier != DefaultTierName || !slices.Equal(p.Spec.Types, []PolicyType{PolicyTypeEgress}) {
		t.Errorf("defaulted spec %+v: want stagedAction Set, tier default, types [Egress]", p.Spec)
	}
	d := &StagedNetworkPolicy{Spec: StagedNetworkPolicySpec{StagedAction: StagedActionDelete, Types: []PolicyType{PolicyTypeIngress}}}
	d.Default()
	if d.Spec.Types != nil {
		t.Errorf("a staged Delete keeps types %v; Calico clears them", d.Spec.Types)
	}
	k := &StagedKubernetesNetworkPolicy{}
	k.Default()
	if k.Spec.StagedAction != StagedActionSet {
		t.Errorf("stagedAction defaulted to %q, want Set", k.Spec.StagedAction)
	}
}
