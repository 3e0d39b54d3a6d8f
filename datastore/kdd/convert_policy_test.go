package kdd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

func proto(s string) *numorstring.Protocol {
	p := numorstring.ProtocolFromString(s)
	return &p
}

func port(s string) numorstring.Port {
	p, err := numorstring.PortFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}

func tcp() *corev1.Protocol { p := corev1.ProtocolTCP; return &p }
func udp() *corev1.Protocol { p := corev1.ProtocolUDP; return &p }
func i32(v int32) *int32    { return &v }
func intPort(v int) *intstr.IntOrString {
	p := intstr.FromInt32(int32(v))
	return &p
}
func namedPort(s string) *intstr.IntOrString {
	p := intstr.FromString(s)
	return &p
}

const k8sPods = "projectcalico.org/orchestrator == 'k8s'"

// TestK8sNetworkPolicyRules converts one Kubernetes rule per case and
// states the Calico rules it must become.
func TestK8sNetworkPolicyRules(t *testing.T) {
	cases := []struct {
		name    string
		ingress bool
		peers   []networkingv1.NetworkPolicyPeer
		ports   []networkingv1.NetworkPolicyPort
		want    []v3.Rule
	}{
		{
			name: "empty rule allows everything", ingress: true,
			want: []v3.Rule{{Action: v3.Allow}},
		},
		{
			name: "pod selector: same namespace, pods only", ingress: true,
			peers: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "fe", "app": "web"}}}},
			want: []v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{
				Selector: k8sPods + " && app == 'web' && role == 'fe'",
			}}},
		},
		{
			name: "namespace selector alone: all pods of matching namespaces", ingress: true,
			peers: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}},
			want: []v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{
				Selector: k8sPods, NamespaceSelector: "team == 'x'",
			}}},
		},
		{
			name: "empty namespace selector: every namespace", ingress: true,
			peers: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
			want:  []v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{Selector: k8sPods, NamespaceSelector: "all()"}}},
		},
		{
			name: "pod and namespace selector together", ingress: true,
			peers: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
					{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}},
					{Key: "ok", Operator: metav1.LabelSelectorOpExists},
					{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
				}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}},
			}},
			want: []v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{
				Selector:          k8sPods + " && tier in { 'a', 'b' } && env not in { 'dev' } && has(ok) && ! has(legacy)",
				NamespaceSelector: "team == 'x'",
			}}},
		},
		{
			name: "ipBlock with exceptions, normalised", ingress: true,
			peers: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1/8", Except: []string{"10.1.0.0/16", "10.2.3.4/16"}}}},
			want: []v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{
				Nets: []string{"10.0.0.0/8"}, NotNets: []string{"10.1.0.0/16", "10.2.0.0/16"},
			}}},
		},
		{
			name: "ports: default TCP, named, endPort range, per-protocol rules", ingress: true,
			ports: []networkingv1.NetworkPolicyPort{
				{Port: namedPort("http")},
				{Protocol: tcp(), Port: intPort(8000), EndPort: i32(8080)},
				{Protocol: udp(), Port: intPort(53)},
				{Port: intPort(8081)},
			},
			want: []v3.Rule{
				{Action: v3.Allow, Protocol: proto("TCP"), Destination: v3.EntityRule{Ports: []numorstring.Port{port("http"), port("8000:8081")}}},
				{Action: v3.Allow, Protocol: proto("UDP"), Destination: v3.EntityRule{Ports: []numorstring.Port{port("53")}}},
			},
		},
		{
			name: "protocol without port: all its ports", ingress: true,
			ports: []networkingv1.NetworkPolicyPort{{Protocol: udp(), Port: intPort(53)}, {Protocol: udp()}},
			want:  []v3.Rule{{Action: v3.Allow, Protocol: proto("UDP")}},
		},
		{
			name: "peers x protocols", ingress: true,
			peers: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16"}},
			},
			ports: []networkingv1.NetworkPolicyPort{{Port: intPort(80)}, {Protocol: udp(), Port: intPort(53)}},
			want: []v3.Rule{
				{Action: v3.Allow, Protocol: proto("TCP"), Source: v3.EntityRule{Selector: k8sPods}, Destination: v3.EntityRule{Ports: []numorstring.Port{port("80")}}},
				{Action: v3.Allow, Protocol: proto("TCP"), Source: v3.EntityRule{Nets: []string{"192.168.0.0/16"}}, Destination: v3.EntityRule{Ports: []numorstring.Port{port("80")}}},
				{Action: v3.Allow, Protocol: proto("UDP"), Source: v3.EntityRule{Selector: k8sPods}, Destination: v3.EntityRule{Ports: []numorstring.Port{port("53")}}},
				{Action: v3.Allow, Protocol: proto("UDP"), Source: v3.EntityRule{Nets: []string{"192.168.0.0/16"}}, Destination: v3.EntityRule{Ports: []numorstring.Port{port("53")}}},
			},
		},
		{
			name: "egress: peer and ports both on the destination", ingress: false,
			peers: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}}},
			ports: []networkingv1.NetworkPolicyPort{{Protocol: udp(), Port: intPort(53)}},
			want: []v3.Rule{{Action: v3.Allow, Protocol: proto("UDP"), Destination: v3.EntityRule{
				Selector: k8sPods, NamespaceSelector: "kubernetes.io/metadata.name == 'kube-system'", Ports: []numorstring.Port{port("53")},
			}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := k8sRuleToCalico(tc.peers, tc.ports, tc.ingress)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("rules (-want +got):\n%s", d)
			}
		})
	}
}

func TestK8sNetworkPolicyToCalico(t *testing.T) {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-web", Namespace: "team-a", ResourceVersion: "11", UID: "30316d8a-39c5-4c5b-8b0f-1b2d6c7e9f01"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: intPort(80)}}}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{}, // Egress listed with no rules: deny all egress
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	got, err := K8sNetworkPolicyToCalico(np)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := ConvertUID(np.UID)
	order := 1000.0
	want := &v3.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "knp.default.allow-web", Namespace: "team-a", ResourceVersion: "11", UID: uid},
		Spec: v3.NetworkPolicySpec{
			Tier:     "default",
			Order:    &order,
			Selector: k8sPods + " && app == 'web'",
			Ingress:  []v3.Rule{{Action: v3.Allow, Protocol: proto("TCP"), Destination: v3.EntityRule{Ports: []numorstring.Port{port("80")}}}},
			Types:    []v3.PolicyType{v3.PolicyTypeIngress, v3.PolicyTypeEgress},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("policy (-want +got):\n%s", d)
	}
	if errs := got.Validate(); len(errs) > 0 {
		t.Fatalf("converted policy does not validate: %v", errs)
	}

	// No policyTypes: ingress only. An empty pod selector selects every pod.
	np.Spec.PolicyTypes = nil
	np.Spec.PodSelector = metav1.LabelSelector{}
	np.Spec.Ingress = nil
	got, _ = K8sNetworkPolicyToCalico(np)
	if d := cmp.Diff([]v3.PolicyType{v3.PolicyTypeIngress}, got.Spec.Types); d != "" {
		t.Errorf("types (-want +got):\n%s", d)
	}
	if got.Spec.Selector != k8sPods || got.Spec.Ingress != nil {
		t.Errorf("deny-all ingress policy: selector %q, ingress %v", got.Spec.Selector, got.Spec.Ingress)
	}

	// A rule that cannot be converted is dropped and reported; the others stay.
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
		{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "bogus"}}}},
		{},
	}
	got, err = K8sNetworkPolicyToCalico(np)
	if err == nil || got == nil || len(got.Spec.Ingress) != 1 {
		t.Fatalf("bad rule: err %v, policy %+v", err, got)
	}
}
