// Package calctest builds Calico resources for felix tests: short
// constructors for endpoints, policies, tiers, profiles and network sets,
// shared by the calc, rules and dataplane tests.
package calctest

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// Proto returns a protocol by name ("TCP", "UDP", "ICMP", ...).
func Proto(name string) *numorstring.Protocol {
	p := numorstring.ProtocolFromString(name)
	return &p
}

// Ports parses port strings ("80", "8000:8080", "http"); it panics on a bad one.
func Ports(ss ...string) []numorstring.Port {
	var out []numorstring.Port
	for _, s := range ss {
		p, err := numorstring.PortFromString(s)
		if err != nil {
			panic(err)
		}
		out = append(out, p)
	}
	return out
}

// WEP is a Kubernetes-style workload endpoint of pod name in namespace ns
// on node, with one IP, the kns.<ns> profile and the given labels.
func WEP(ns, pod, node, iface, ip string, labels map[string]string) *v3.WorkloadEndpoint {
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	l["projectcalico.org/namespace"] = ns
	l["projectcalico.org/orchestrator"] = "k8s"
	return &v3.WorkloadEndpoint{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: node + "-k8s-" + pod + "-eth0", Labels: l},
		Spec: v3.WorkloadEndpointSpec{
			Orchestrator: "k8s", Node: node, Pod: pod, Endpoint: "eth0",
			IPNetworks: []string{ip + "/32"}, InterfaceName: iface,
			Profiles: []string{"kns." + ns},
		},
	}
}

// NSProfile is the kns.<ns> profile Calico keeps per namespace: it allows
// everything and applies the namespace's labels with the "pcns." prefix.
func NSProfile(ns string, labels map[string]string) *v3.Profile {
	lta := map[string]string{"pcns.projectcalico.org/name": ns}
	for k, v := range labels {
		lta["pcns."+k] = v
	}
	return &v3.Profile{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: "kns." + ns},
		Spec: v3.ProfileSpec{
			Ingress:       []v3.Rule{{Action: v3.Allow}},
			Egress:        []v3.Rule{{Action: v3.Allow}},
			LabelsToApply: lta,
		},
	}
}

// NP is a namespaced NetworkPolicy in the default tier.
func NP(ns, name string, order *float64, sel string, types []v3.PolicyType, in, out []v3.Rule) *v3.NetworkPolicy {
	return &v3.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v3.NetworkPolicySpec{
			Tier: v3.DefaultTierName, Order: order, Selector: sel, Types: types, Ingress: in, Egress: out,
		},
	}
}

// GNP is a GlobalNetworkPolicy.
func GNP(name, tier string, order *float64, sel string, types []v3.PolicyType, in, out []v3.Rule) *v3.GlobalNetworkPolicy {
	return &v3.GlobalNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v3.GlobalNetworkPolicySpec{
			Tier: tier, Order: order, Selector: sel, Types: types, Ingress: in, Egress: out,
		},
	}
}

// Tier is a tier with an order and default action.
func Tier(name string, order float64, action v3.Action) *v3.Tier {
	return &v3.Tier{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindTier, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v3.TierSpec{Order: &order, DefaultAction: &action},
	}
}

// NetSet is a namespaced NetworkSet.
func NetSet(ns, name string, labels map[string]string, nets ...string) *v3.NetworkSet {
	return &v3.NetworkSet{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindNetworkSet, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       v3.NetworkSetSpec{Nets: nets},
	}
}

// GlobalNetSet is a GlobalNetworkSet.
func GlobalNetSet(name string, labels map[string]string, nets ...string) *v3.GlobalNetworkSet {
	return &v3.GlobalNetworkSet{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindGlobalNetworkSet, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v3.GlobalNetworkSetSpec{Nets: nets},
	}
}

// Ingress and Egress are policy type lists.
var (
	Ingress = []v3.PolicyType{v3.PolicyTypeIngress}
	Egress  = []v3.PolicyType{v3.PolicyTypeEgress}
	Both    = []v3.PolicyType{v3.PolicyTypeIngress, v3.PolicyTypeEgress}
)

// HEP is a host endpoint for interface iface of node, with expected IPs.
func HEP(name, node, iface string, labels map[string]string, ips ...string) *v3.HostEndpoint {
	return &v3.HostEndpoint{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindHostEndpoint, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       v3.HostEndpointSpec{Node: node, InterfaceName: iface, ExpectedIPs: ips},
	}
}

// HostPolicy sets a GlobalNetworkPolicy's host endpoint flags
// (applyOnForward, preDNAT, doNotTrack) and returns it. preDNAT and
// doNotTrack imply applyOnForward, as validation requires.
func HostPolicy(p *v3.GlobalNetworkPolicy, applyOnForward, preDNAT, doNotTrack bool) *v3.GlobalNetworkPolicy {
	p.Spec.ApplyOnForward = applyOnForward || preDNAT || doNotTrack
	p.Spec.PreDNAT, p.Spec.DoNotTrack = preDNAT, doNotTrack
	return p
}

// SlicePort is one port of an EndpointSlice: a protocol ("TCP", "UDP",
// "SCTP"; "" for none given) and a number (0 for none given).
type SlicePort struct {
	Proto string
	Port  int32
}

// EndpointSlice is a Kubernetes EndpointSlice of Service service in ns,
// one endpoint per address, with the given ports.
func EndpointSlice(ns, name, service string, addrs []string, ports ...SlicePort) *v3.KubernetesEndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v3.ServiceNameLabel: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	for _, p := range ports {
		var sp discoveryv1.EndpointPort
		if p.Proto != "" {
			sp.Protocol = Ptr(corev1.Protocol(p.Proto))
		}
		if p.Port != 0 {
			sp.Port = Ptr(p.Port)
		}
		es.Ports = append(es.Ports, sp)
	}
	return v3.NewKubernetesEndpointSlice(es)
}
