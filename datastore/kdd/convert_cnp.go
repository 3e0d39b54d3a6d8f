package kdd

import (
	"errors"
	"fmt"
	"net"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// ClusterNetworkPolicyNamePrefix starts the name of the GlobalNetworkPolicy
// that stands for a Kubernetes ClusterNetworkPolicy: "kcnp.<name>", the
// name Calico gives a KubernetesClusterNetworkPolicy in its tier-qualified
// (legacy) policy names ("kcnp/<name>" in its flow logs).
const ClusterNetworkPolicyNamePrefix = "kcnp."

// CNPRuleNameAnnotation is the rule annotation that carries a
// ClusterNetworkPolicy rule's name (Calico's K8sCNPRuleNameLabel).
const CNPRuleNameAnnotation = "name"

// CNPConversionError lists the rules of a ClusterNetworkPolicy that could
// not be converted. The policy still converts: each such Deny or Pass rule
// became a Deny of everything reaching it, each such Accept rule was left
// out (it allows less, never more), as Calico's converter does.
type CNPConversionError struct {
	Policy string
	Rules  []CNPBadRule
}

// CNPBadRule is one rule that could not be converted.
type CNPBadRule struct {
	Direction string // "ingress" or "egress"
	Index     int    // in the ClusterNetworkPolicy's list
	Name      string // the rule's name, if any
	Action    cnpv1.ClusterNetworkPolicyRuleAction
	Err       error
}

func (e *CNPConversionError) Error() string {
	msgs := make([]error, 0, len(e.Rules))
	for _, r := range e.Rules {
		what := "dropped"
		if r.Action != cnpv1.ClusterNetworkPolicyRuleActionAccept {
			what = "replaced by a deny-all rule"
		}
		msgs = append(msgs, fmt.Errorf("%s rule %d (%q, %s) %s: %w", r.Direction, r.Index, r.Name, r.Action, what, r.Err))
	}
	return fmt.Sprintf("ClusterNetworkPolicy %s: %v", e.Policy, errors.Join(msgs...))
}

// K8sClusterNetworkPolicyToCalico converts a Kubernetes ClusterNetworkPolicy
// (policy.networking.k8s.io/v1alpha2) to the GlobalNetworkPolicy
// "kcnp.<name>" as Calico 3.32's converter does:
//
//   - tier Admin becomes tier kube-admin, Baseline kube-baseline (both
//     with default action Pass, so a packet no rule matches goes on to the
//     next tier); the priority is the order (equal priorities are ordered
//     by name, as any two policies of one order; the API leaves ties to
//     the implementation);
//   - a subject by namespaces selects every Kubernetes pod of those
//     namespaces, one by pods its pods of its namespaces;
//   - Accept becomes Allow, Deny and Pass stay; each peer and protocol
//     makes one rule, the ports of one protocol merged into ranges, a named
//     port one rule without protocol (any protocol's port of that name);
//     an egress peer's networks become nets;
//   - the policy has a type only for a direction it has rules in.
//
// A policy with neither a known tier nor a subject cannot be converted
// (nil and an error; the API server refuses such objects). A rule that
// cannot be converted (an unsupported peer such as nodes or domainNames,
// a bad CIDR, port or selector) fails closed: a Deny or Pass rule becomes
// a Deny of everything, an Accept rule is dropped; the policy is returned
// with a *CNPConversionError naming those rules.
func K8sClusterNetworkPolicyToCalico(cnp *cnpv1.ClusterNetworkPolicy) (*v3.GlobalNetworkPolicy, error) {
	tier, err := cnpTier(cnp.Spec.Tier)
	if err != nil {
		return nil, fmt.Errorf("ClusterNetworkPolicy %s: %w", cnp.Name, err)
	}
	nsSel, podSel, err := cnpSubject(&cnp.Spec.Subject)
	if err != nil {
		return nil, fmt.Errorf("ClusterNetworkPolicy %s: subject: %w", cnp.Name, err)
	}
	uid, err := derivedUID(cnp.UID)
	if err != nil {
		return nil, err
	}
	bad := &CNPConversionError{Policy: cnp.Name}
	var ingress, egress []v3.Rule
	for i, r := range cnp.Spec.Ingress {
		peers := make([]cnpv1.ClusterNetworkPolicyEgressPeer, len(r.From))
		for j, p := range r.From {
			peers[j] = cnpv1.ClusterNetworkPolicyEgressPeer{Namespaces: p.Namespaces, Pods: p.Pods}
		}
		ingress = bad.add(ingress, "ingress", i, r.Name, r.Action, r.Protocols, peers, true)
	}
	for i, r := range cnp.Spec.Egress {
		egress = bad.add(egress, "egress", i, r.Name, r.Action, r.Protocols, r.To, false)
	}
	var types []v3.PolicyType
	if len(ingress) > 0 {
		types = append(types, v3.PolicyTypeIngress)
	}
	if len(egress) > 0 {
		types = append(types, v3.PolicyTypeEgress)
	}
	order := float64(cnp.Spec.Priority)
	gnp := &v3.GlobalNetworkPolicy{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name:              ClusterNetworkPolicyNamePrefix + cnp.Name,
			ResourceVersion:   cnp.ResourceVersion,
			UID:               uid,
			CreationTimestamp: cnp.CreationTimestamp,
		},
		Spec: v3.GlobalNetworkPolicySpec{
			Tier:              tier,
			Order:             &order,
			NamespaceSelector: nsSel,
			Selector:          podSel,
			Ingress:           ingress,
			Egress:            egress,
			Types:             types,
		},
	}
	if len(bad.Rules) > 0 {
		return gnp, bad
	}
	return gnp, nil
}

// add converts one rule and appends what it becomes to out: its rules, or
// when it cannot be converted the fail-closed stand-in (recorded in e).
func (e *CNPConversionError) add(out []v3.Rule, dir string, i int, name string, action cnpv1.ClusterNetworkPolicyRuleAction,
	protocols []cnpv1.ClusterNetworkPolicyProtocol, peers []cnpv1.ClusterNetworkPolicyEgressPeer, ingress bool) []v3.Rule {
	rules, err := cnpRule(name, action, protocols, peers, ingress)
	if err == nil {
		return append(out, rules...)
	}
	e.Rules = append(e.Rules, CNPBadRule{Direction: dir, Index: i, Name: name, Action: action, Err: err})
	if action == cnpv1.ClusterNetworkPolicyRuleActionAccept {
		return out
	}
	return append(out, v3.Rule{Action: v3.Deny})
}

func cnpTier(t cnpv1.Tier) (string, error) {
	switch t {
	case cnpv1.AdminTier:
		return v3.KubeAdminTierName, nil
	case cnpv1.BaselineTier:
		return v3.KubeBaselineTierName, nil
	}
	return "", fmt.Errorf("tier %q is neither %s nor %s", t, cnpv1.AdminTier, cnpv1.BaselineTier)
}

// cnpSubject returns the namespace and pod selectors of the pods a policy
// applies to.
func cnpSubject(s *cnpv1.ClusterNetworkPolicySubject) (nsSel, podSel string, err error) {
	switch {
	case s.Namespaces != nil:
		nsSel, err = v3.K8sSelectorToCalico(s.Namespaces, false)
		if err != nil {
			return "", "", fmt.Errorf("namespaces: %w", err)
		}
		podSel, _ = v3.K8sSelectorToCalico(nil, true)
		return nsSel, podSel, nil
	case s.Pods != nil:
		return cnpPods(s.Pods)
	}
	return "", "", errors.New("neither namespaces nor pods is set")
}

func cnpPods(p *cnpv1.NamespacedPod) (nsSel, podSel string, err error) {
	if nsSel, err = v3.K8sSelectorToCalico(&p.NamespaceSelector, false); err != nil {
		return "", "", fmt.Errorf("pods.namespaceSelector: %w", err)
	}
	if podSel, err = v3.K8sSelectorToCalico(&p.PodSelector, true); err != nil {
		return "", "", fmt.Errorf("pods.podSelector: %w", err)
	}
	return nsSel, podSel, nil
}

func cnpAction(a cnpv1.ClusterNetworkPolicyRuleAction) (v3.Action, error) {
	switch a {
	case cnpv1.ClusterNetworkPolicyRuleActionAccept:
		return v3.Allow, nil
	case cnpv1.ClusterNetworkPolicyRuleActionDeny:
		return v3.Deny, nil
	case cnpv1.ClusterNetworkPolicyRuleActionPass:
		return v3.Pass, nil
	}
	return "", fmt.Errorf("action %q is not Accept, Deny or Pass", a)
}

// cnpRule converts one rule: one Calico rule per protocol and peer (an
// ingress peer's fields are the source, an egress peer's the destination;
// ports are always the destination's).
func cnpRule(name string, a cnpv1.ClusterNetworkPolicyRuleAction, protocols []cnpv1.ClusterNetworkPolicyProtocol,
	peers []cnpv1.ClusterNetworkPolicyEgressPeer, ingress bool) ([]v3.Rule, error) {
	action, err := cnpAction(a)
	if err != nil {
		return nil, err
	}
	byProto, protos, err := cnpProtocols(protocols)
	if err != nil {
		return nil, err
	}
	entities := make([]v3.EntityRule, 0, len(peers))
	for j := range peers {
		e, err := cnpPeer(&peers[j], ingress)
		if err != nil {
			return nil, fmt.Errorf("peer %d: %w", j, err)
		}
		entities = append(entities, e)
	}
	var meta *v3.RuleMetadata
	if name != "" {
		meta = &v3.RuleMetadata{Annotations: map[string]string{CNPRuleNameAnnotation: name}}
	}
	var rules []v3.Rule
	for _, p := range protos {
		var proto *numorstring.Protocol
		if p != "" {
			pr := numorstring.ProtocolFromString(p)
			proto = &pr
		}
		ports := simplifyPorts(byProto[p])
		for _, e := range entities {
			r := v3.Rule{Metadata: meta, Action: action, Protocol: proto}
			if ingress {
				r.Source = e
				r.Destination = v3.EntityRule{Ports: ports}
			} else {
				e.Ports = ports
				r.Destination = e
			}
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// cnpPeer converts one peer; exactly one of its fields is set (the API
// server checks), and only namespaces, pods and (egress) networks can be
// converted.
func cnpPeer(p *cnpv1.ClusterNetworkPolicyEgressPeer, ingress bool) (v3.EntityRule, error) {
	var e v3.EntityRule
	var err error
	switch {
	case p.Namespaces != nil:
		if e.NamespaceSelector, err = v3.K8sSelectorToCalico(p.Namespaces, false); err != nil {
			return e, fmt.Errorf("namespaces: %w", err)
		}
	case p.Pods != nil:
		if e.NamespaceSelector, e.Selector, err = cnpPods(p.Pods); err != nil {
			return e, err
		}
	case len(p.Networks) > 0 && !ingress:
		for _, n := range p.Networks {
			_, ipNet, err := net.ParseCIDR(string(n))
			if err != nil {
				return e, fmt.Errorf("networks: %q is not a CIDR", n)
			}
			e.Nets = append(e.Nets, ipNet.String())
		}
	case p.Nodes != nil:
		return e, errors.New("nodes peers are not supported")
	case len(p.DomainNames) > 0:
		return e, errors.New("domainNames peers are not supported")
	default:
		return e, errors.New("none of the supported peer fields (namespaces, pods, networks) is set")
	}
	return e, nil
}

// cnpProtocols groups a rule's protocols' destination ports by protocol
// name ("" for named ports, which name no protocol, and for "any"): the
// map's nil list means every port. No protocols, or an empty one, means
// any protocol and port.
func cnpProtocols(ps []cnpv1.ClusterNetworkPolicyProtocol) (map[string][]numorstring.Port, []string, error) {
	out := map[string][]numorstring.Port{}
	if len(ps) == 0 {
		return map[string][]numorstring.Port{"": nil}, []string{""}, nil
	}
	for i := range ps {
		proto, port, err := cnpProtocol(&ps[i])
		if err != nil {
			return nil, nil, fmt.Errorf("protocols[%d]: %w", i, err)
		}
		if proto == "" && port == nil {
			// Any protocol and port: nothing narrower matters.
			return map[string][]numorstring.Port{"": nil}, []string{""}, nil
		}
		if port == nil {
			out[proto] = nil // every port of proto, whatever else is listed
		} else if cur, seen := out[proto]; !seen || len(cur) > 0 {
			out[proto] = append(cur, *port)
		}
	}
	protos := make([]string, 0, len(out))
	for p := range out {
		protos = append(protos, p)
	}
	sort.Strings(protos)
	return out, protos, nil
}

// cnpProtocol returns one protocol entry's protocol and destination port
// (nil: every port).
func cnpProtocol(p *cnpv1.ClusterNetworkPolicyProtocol) (string, *numorstring.Port, error) {
	var proto string
	var dp *cnpv1.Port
	switch {
	case p.TCP != nil:
		proto, dp = numorstring.ProtocolTCP, p.TCP.DestinationPort
	case p.UDP != nil:
		proto, dp = numorstring.ProtocolUDP, p.UDP.DestinationPort
	case p.SCTP != nil:
		proto, dp = numorstring.ProtocolSCTP, p.SCTP.DestinationPort
	case p.DestinationNamedPort != "":
		port, err := numorstring.PortFromString(p.DestinationNamedPort)
		if err != nil || !port.IsNamed() {
			return "", nil, fmt.Errorf("destinationNamedPort %q is not a port name", p.DestinationNamedPort)
		}
		return "", &port, nil
	default:
		return "", nil, nil
	}
	port, err := cnpPort(dp)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", proto, err)
	}
	return proto, port, nil
}

// cnpPort converts a destination port: a number or a range (nil: every
// port).
func cnpPort(dp *cnpv1.Port) (*numorstring.Port, error) {
	switch {
	case dp == nil:
		return nil, nil
	case dp.Number != 0:
		if dp.Number < 1 || dp.Number > 65535 {
			return nil, fmt.Errorf("port %d is not a port", dp.Number)
		}
		p := numorstring.SinglePort(uint16(dp.Number))
		return &p, nil
	case dp.Range != nil:
		if dp.Range.Start < 1 || dp.Range.End > 65535 || dp.Range.Start > dp.Range.End {
			return nil, fmt.Errorf("port range %d-%d is not a range of ports", dp.Range.Start, dp.Range.End)
		}
		p, err := numorstring.PortRange(uint16(dp.Range.Start), uint16(dp.Range.End))
		return &p, err
	}
	return nil, nil
}
