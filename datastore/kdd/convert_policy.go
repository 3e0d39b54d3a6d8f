package kdd

import (
	"errors"
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// K8sNetworkPolicyToCalico converts a Kubernetes NetworkPolicy to the Calico
// NetworkPolicy "knp.default.<name>" in tier default at order 1000, with
// Kubernetes' semantics:
//
//   - the pod selector becomes a selector that also requires
//     projectcalico.org/orchestrator == 'k8s' (only pods, never host
//     endpoints or network sets);
//   - each rule (a list of peers x a list of ports) becomes one Allow rule
//     per peer and per protocol, the ports of one protocol merged into
//     ranges;
//   - a peer's namespaceSelector becomes the rule's namespaceSelector
//     (an empty one is all()), its podSelector the rule's selector, an
//     ipBlock nets with the exceptions as notNets;
//   - a port without protocol is TCP; endPort makes a range;
//   - policyTypes become types (Ingress when none are given); a type with
//     no rules allows nothing, so denies all in that direction.
//
// A rule that cannot be converted is dropped (the policy allows less, never
// more) and reported in the error, alongside the converted policy.
func K8sNetworkPolicyToCalico(np *networkingv1.NetworkPolicy) (*v3.NetworkPolicy, error) {
	var bad []error
	var ingress, egress []v3.Rule
	for i, r := range np.Spec.Ingress {
		rules, err := k8sRuleToCalico(r.From, r.Ports, true)
		if err != nil {
			bad = append(bad, fmt.Errorf("ingress rule %d dropped: %w", i, err))
			continue
		}
		ingress = append(ingress, rules...)
	}
	for i, r := range np.Spec.Egress {
		rules, err := k8sRuleToCalico(r.To, r.Ports, false)
		if err != nil {
			bad = append(bad, fmt.Errorf("egress rule %d dropped: %w", i, err))
			continue
		}
		egress = append(egress, rules...)
	}

	var hasIngress, hasEgress bool
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			hasIngress = true
		case networkingv1.PolicyTypeEgress:
			hasEgress = true
		}
	}
	types := []v3.PolicyType{}
	if hasIngress {
		types = append(types, v3.PolicyTypeIngress)
	}
	if hasEgress {
		types = append(types, v3.PolicyTypeEgress)
	}
	if len(types) == 0 {
		// No policyTypes (an API server older than the field): ingress only.
		types = append(types, v3.PolicyTypeIngress)
	}

	uid, err := derivedUID(np.UID)
	if err != nil {
		return nil, err
	}
	podSel, err := v3.K8sSelectorToCalico(&np.Spec.PodSelector, true)
	if err != nil {
		return nil, fmt.Errorf("podSelector: %w", err)
	}
	order := k8sNetworkPolicyOrder
	pol := &v3.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name:              k8sNetworkPolicyNamePrefix + np.Name,
			Namespace:         np.Namespace,
			ResourceVersion:   np.ResourceVersion,
			UID:               uid,
			CreationTimestamp: np.CreationTimestamp,
		},
		Spec: v3.NetworkPolicySpec{
			Tier:     v3.DefaultTierName,
			Order:    &order,
			Selector: podSel,
			Ingress:  ingress,
			Egress:   egress,
			Types:    types,
		},
	}
	if len(bad) > 0 {
		return pol, fmt.Errorf("kubernetes NetworkPolicy %s/%s: %w", np.Namespace, np.Name, errors.Join(bad...))
	}
	return pol, nil
}

// k8sRuleToCalico converts one Kubernetes rule. No peers means any peer;
// no ports means any port and protocol.
func k8sRuleToCalico(peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, ingress bool) ([]v3.Rule, error) {
	// protocol ("" = any) -> ports (nil = all ports of that protocol).
	byProto := map[string][]numorstring.Port{}
	if len(ports) == 0 {
		byProto[""] = nil
	}
	for _, p := range ports {
		proto := string(corev1.ProtocolTCP)
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		if p.Port == nil {
			byProto[proto] = nil // all ports: overrides any single ports
			continue
		}
		s := p.Port.String()
		if p.EndPort != nil {
			s = fmt.Sprintf("%s:%d", s, *p.EndPort)
		}
		port, err := numorstring.PortFromString(s)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", s, err)
		}
		if cur, seen := byProto[proto]; !seen || len(cur) > 0 {
			byProto[proto] = append(cur, port)
		}
	}
	protos := make([]string, 0, len(byProto))
	for p := range byProto {
		protos = append(protos, p)
	}
	sort.Strings(protos)

	type peerFields struct {
		selector, nsSelector string
		nets, notNets        []string
	}
	var converted []peerFields
	for _, peer := range peers {
		var f peerFields
		if b := peer.IPBlock; b != nil {
			_, n, err := net.ParseCIDR(b.CIDR)
			if err != nil {
				return nil, fmt.Errorf("ipBlock cidr %q is not a CIDR", b.CIDR)
			}
			f.nets = []string{n.String()}
			for _, ex := range b.Except {
				_, n, err := net.ParseCIDR(ex)
				if err != nil {
					return nil, fmt.Errorf("ipBlock except %q is not a CIDR", ex)
				}
				f.notNets = append(f.notNets, n.String())
			}
		} else {
			var err error
			if f.selector, err = v3.K8sSelectorToCalico(peer.PodSelector, true); err != nil {
				return nil, fmt.Errorf("podSelector: %w", err)
			}
			if f.nsSelector, err = v3.K8sSelectorToCalico(peer.NamespaceSelector, false); err != nil {
				return nil, fmt.Errorf("namespaceSelector: %w", err)
			}
		}
		converted = append(converted, f)
	}
	if len(converted) == 0 {
		converted = []peerFields{{}} // from/to anywhere
	}

	var rules []v3.Rule
	for _, protoName := range protos {
		var proto *numorstring.Protocol
		if protoName != "" {
			p := numorstring.ProtocolFromString(protoName)
			proto = &p
		}
		portList := simplifyPorts(byProto[protoName])
		for _, f := range converted {
			peer := v3.EntityRule{Selector: f.selector, NamespaceSelector: f.nsSelector, Nets: f.nets, NotNets: f.notNets}
			r := v3.Rule{Action: v3.Allow, Protocol: proto}
			if ingress {
				r.Source = peer
				r.Destination = v3.EntityRule{Ports: portList}
			} else {
				peer.Ports = portList
				r.Destination = peer
			}
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// simplifyPorts merges numeric ports into the fewest ranges, sorted, with
// named ports first in their original order (Calico's SimplifyPorts).
func simplifyPorts(ports []numorstring.Port) []numorstring.Port {
	if len(ports) <= 1 {
		return ports
	}
	var out []numorstring.Port
	var nums []int
	for _, p := range ports {
		if p.IsNamed() {
			out = append(out, p)
			continue
		}
		for i := int(p.MinPort); i <= int(p.MaxPort); i++ {
			nums = append(nums, i)
		}
	}
	if len(nums) <= 1 {
		return ports
	}
	sort.Ints(nums)
	for len(nums) > 0 {
		first, last := nums[0], nums[0]
		nums = nums[1:]
		for len(nums) > 0 && nums[0] <= last+1 {
			last = nums[0]
			nums = nums[1:]
		}
		r, _ := numorstring.PortRange(uint16(first), uint16(last))
		out = append(out, r)
	}
	return out
}
