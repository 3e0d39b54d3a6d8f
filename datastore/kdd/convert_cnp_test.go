package kdd

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

func labels(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func tcpPort(n int32) cnpv1.ClusterNetworkPolicyProtocol {
	return cnpv1.ClusterNetworkPolicyProtocol{TCP: &cnpv1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1.Port{Number: n}}}
}

func order(f float64) *float64 { return &f }

// TestK8sClusterNetworkPolicyToCalico converts one ClusterNetworkPolicy per
// case and states the GlobalNetworkPolicy spec it must become (Calico
// 3.32's conversion).
func TestK8sClusterNetworkPolicyToCalico(t *testing.T) {
	nsX := labels("kubernetes.io/metadata.name", "x")
	cases := []struct {
		name    string
		spec    cnpv1.ClusterNetworkPolicySpec
		want    v3.GlobalNetworkPolicySpec
		badRule []int // indexes of rules reported as unconvertible (ingress then egress)
	}{
		{
			name: "admin deny from a namespace: tier kube-admin, priority is the order",
			spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 7,
				Subject: cnpv1.ClusterNetworkPolicySubject{Namespaces: nsX},
				Ingress: []cnpv1.ClusterNetworkPolicyIngressRule{{Name: "no-y", Action: cnpv1.ClusterNetworkPolicyRuleActionDeny,
					From: []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: labels("kubernetes.io/metadata.name", "y")}}}}},
			want: v3.GlobalNetworkPolicySpec{Tier: "kube-admin", Order: order(7),
				NamespaceSelector: "kubernetes.io/metadata.name == 'x'", Selector: k8sPods,
				Ingress: []v3.Rule{{Action: v3.Deny, Metadata: &v3.RuleMetadata{Annotations: map[string]string{"name": "no-y"}},
					Source: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'y'"}}},
				Types: []v3.PolicyType{v3.PolicyTypeIngress}},
		},
		{
			name: "baseline, pods subject, accept and pass egress to pods and networks",
			spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.BaselineTier, Priority: 0,
				Subject: cnpv1.ClusterNetworkPolicySubject{Pods: &cnpv1.NamespacedPod{NamespaceSelector: metav1.LabelSelector{}, PodSelector: *labels("app", "a")}},
				Egress: []cnpv1.ClusterNetworkPolicyEgressRule{
					{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept,
						To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Pods: &cnpv1.NamespacedPod{NamespaceSelector: *nsX, PodSelector: *labels("app", "b")}}}},
					{Action: cnpv1.ClusterNetworkPolicyRuleActionPass,
						To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1.CIDR{"10.1.2.3/8", "fd00::/64"}}}},
				}},
			want: v3.GlobalNetworkPolicySpec{Tier: "kube-baseline", Order: order(0),
				NamespaceSelector: "all()", Selector: k8sPods + " && app == 'a'",
				Egress: []v3.Rule{
					{Action: v3.Allow, Destination: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'x'", Selector: k8sPods + " && app == 'b'"}},
					{Action: v3.Pass, Destination: v3.EntityRule{Nets: []string{"10.0.0.0/8", "fd00::/64"}}},
				},
				Types: []v3.PolicyType{v3.PolicyTypeEgress}},
		},
		{
			name: "ports: numbers merged into ranges per protocol, range, named port without protocol, rule per peer",
			spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 1000,
				Subject: cnpv1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
				Ingress: []cnpv1.ClusterNetworkPolicyIngressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept,
					From: []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: nsX}, {Pods: &cnpv1.NamespacedPod{PodSelector: *labels("a", "b")}}},
					Protocols: []cnpv1.ClusterNetworkPolicyProtocol{tcpPort(81), tcpPort(80),
						{UDP: &cnpv1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnpv1.Port{Range: &cnpv1.PortRange{Start: 1000, End: 2000}}}},
						{DestinationNamedPort: "http"}}}}},
			want: v3.GlobalNetworkPolicySpec{Tier: "kube-admin", Order: order(1000),
				NamespaceSelector: "all()", Selector: k8sPods,
				Ingress: []v3.Rule{
					{Action: v3.Allow, Source: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'x'"},
						Destination: v3.EntityRule{Ports: []numorstring.Port{numorstring.NamedPort("http")}}},
					{Action: v3.Allow, Source: v3.EntityRule{NamespaceSelector: "all()", Selector: k8sPods + " && a == 'b'"},
						Destination: v3.EntityRule{Ports: []numorstring.Port{numorstring.NamedPort("http")}}},
					{Action: v3.Allow, Protocol: proto("TCP"), Source: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'x'"},
						Destination: v3.EntityRule{Ports: []numorstring.Port{port("80:81")}}},
					{Action: v3.Allow, Protocol: proto("TCP"), Source: v3.EntityRule{NamespaceSelector: "all()", Selector: k8sPods + " && a == 'b'"},
						Destination: v3.EntityRule{Ports: []numorstring.Port{port("80:81")}}},
					{Action: v3.Allow, Protocol: proto("UDP"), Source: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'x'"},
						Destination: v3.EntityRule{Ports: []numorstring.Port{port("1000:2000")}}},
					{Action: v3.Allow, Protocol: proto("UDP"), Source: v3.EntityRule{NamespaceSelector: "all()", Selector: k8sPods + " && a == 'b'"},
						Destination: v3.EntityRule{Ports: []numorstring.Port{port("1000:2000")}}},
				},
				Types: []v3.PolicyType{v3.PolicyTypeIngress}},
		},
		{
			name: "a protocol without port means every port of it; an empty protocol list any",
			spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 3,
				Subject: cnpv1.ClusterNetworkPolicySubject{Namespaces: nsX},
				Egress: []cnpv1.ClusterNetworkPolicyEgressRule{
					{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Namespaces: nsX}},
						Protocols: []cnpv1.ClusterNetworkPolicyProtocol{tcpPort(80), {TCP: &cnpv1.ClusterNetworkPolicyProtocolTCP{}}}},
					{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Namespaces: nsX}}},
				}},
			want: v3.GlobalNetworkPolicySpec{Tier: "kube-admin", Order: order(3),
				NamespaceSelector: "kubernetes.io/metadata.name == 'x'", Selector: k8sPods,
				Egress: []v3.Rule{
					{Action: v3.Deny, Protocol: proto("TCP"), Destination: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'x'"}},
					{Action: v3.Deny, Destination: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'x'"}},
				},
				Types: []v3.PolicyType{v3.PolicyTypeEgress}},
		},
		{
			name: "unconvertible rules fail closed: Deny and Pass deny all, Accept is dropped",
			spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 5,
				Subject: cnpv1.ClusterNetworkPolicySubject{Namespaces: nsX},
				Ingress: []cnpv1.ClusterNetworkPolicyIngressRule{
					{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept, From: []cnpv1.ClusterNetworkPolicyIngressPeer{{}}},
				},
				Egress: []cnpv1.ClusterNetworkPolicyEgressRule{
					{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Nodes: labels("a", "b")}}},
					{Action: cnpv1.ClusterNetworkPolicyRuleActionPass, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1.CIDR{"10.0.0.300/8"}}}},
					{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1.DomainName{"example.com"}}}},
					{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept, To: []cnpv1.ClusterNetworkPolicyEgressPeer{{Namespaces: nsX}}},
				}},
			want: v3.GlobalNetworkPolicySpec{Tier: "kube-admin", Order: order(5),
				NamespaceSelector: "kubernetes.io/metadata.name == 'x'", Selector: k8sPods,
				Egress: []v3.Rule{
					{Action: v3.Deny},
					{Action: v3.Deny},
					{Action: v3.Allow, Destination: v3.EntityRule{NamespaceSelector: "kubernetes.io/metadata.name == 'x'"}},
				},
				Types: []v3.PolicyType{v3.PolicyTypeEgress}},
			badRule: []int{0, 0, 1, 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cnp := &cnpv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "12"}, Spec: tc.spec}
			got, err := K8sClusterNetworkPolicyToCalico(cnp)
			if got == nil {
				t.Fatalf("no policy: %v", err)
			}
			if got.Name != "kcnp.p" || got.Kind != v3.KindGlobalNetworkPolicy || got.ResourceVersion != "12" {
				t.Errorf("got %s %q rv %q, want GlobalNetworkPolicy kcnp.p rv 12", got.Kind, got.Name, got.ResourceVersion)
			}
			if d := cmp.Diff(tc.want, got.Spec); d != "" {
				t.Errorf("spec (-want +got):\n%s", d)
			}
			var ce *CNPConversionError
			if len(tc.badRule) == 0 {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *CNPConversionError", err)
			}
			var idx []int
			for _, r := range ce.Rules {
				idx = append(idx, r.Index)
			}
			if d := cmp.Diff(tc.badRule, idx); d != "" {
				t.Errorf("bad rules (-want +got):\n%s\n%v", d, err)
			}
		})
	}
}

// TestK8sClusterNetworkPolicyMalformed: a policy with no known tier or no
// subject converts to nothing (Calico skips it too).
func TestK8sClusterNetworkPolicyMalformed(t *testing.T) {
	for _, spec := range []cnpv1.ClusterNetworkPolicySpec{
		{Tier: "Developer", Subject: cnpv1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}},
		{Tier: cnpv1.AdminTier},
	} {
		got, err := K8sClusterNetworkPolicyToCalico(&cnpv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: spec})
		if got != nil || err == nil {
			t.Errorf("%+v: got %v, %v; want no policy and an error", spec, got, err)
		}
	}
}
