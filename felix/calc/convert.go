package calc

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// demand is an ipset some rule needs; its members are computed once all
// rules are known.
type demand struct {
	id       string
	typ      IPSetType
	sel      *matcher // selector and named-port sets
	proto    uint8    // named-port sets
	portName string   // named-port sets
	nets     []netip.Prefix
	// service is the "<namespace>/<name>" of a Kubernetes Service whose
	// endpoints are the members (service sets; see services.go).
	service string
}

// members computes the set's content over all labelled items; matches
// says which of them d.sel matches (nil for a CIDR or service set); slices
// are the EndpointSlices of d's service.
func (d *demand) members(all []labelled, matches []bool, slices []*v3.KubernetesEndpointSlice) *IPSet {
	var members []string
	for _, s := range slices {
		members = appendSliceMembers(members, d, s)
	}
	if d.nets != nil {
		members = prefixStrings(d.nets)
	}
	for i := range matches {
		if matches[i] {
			members = appendMembers(members, d, &all[i])
		}
	}
	// Sorted, without repeats (two endpoints may share an address).
	return &IPSet{ID: d.id, Type: d.typ, Members: SortedMembers(members)}
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 132:
		return "sctp"
	case 136:
		return "udplite"
	}
	return fmt.Sprint(p)
}

// ruleOwner names the policy or profile, and the direction, a list of
// rules belongs to (for reports).
type ruleOwner struct {
	kind, namespace, name, direction string
}

// fault is one part of a rule that cannot be rendered: it is left out of
// the converted rule.
type fault struct {
	reason string
	err    error
}

// convertRules resolves a policy's or profile's rules in the namespace scope
// ns ("" for global) and registers the ipsets of the rules it keeps in
// demands. svc says whether felix follows Kubernetes Services (it does on
// the Kubernetes datastore only): without, a services match cannot be
// rendered. A rule
// that cannot be rendered as written never fails open (see Handling): an
// Allow is dropped, a Deny keeps only what can be rendered (it denies
// more), and any other rule (Pass, Log, an unknown action) becomes a Deny
// of everything reaching it. Each such rule is reported.
func convertRules(rules []v3.Rule, ns string, owner ruleOwner, svc bool, demands map[string]*demand) ([]Rule, []Unrenderable) {
	var out []Rule
	var bad []Unrenderable
	for i := range rules {
		local := map[string]*demand{}
		r, faults := convertRule(&rules[i], ns, svc, local)
		r.Index = i
		if len(faults) == 0 {
			out = append(out, r)
			maps.Copy(demands, local)
			continue
		}
		var h Handling
		switch rules[i].Action {
		case v3.Allow:
			h = Dropped
		case v3.Deny:
			h = Widened
			out = append(out, r)
			maps.Copy(demands, local)
		default:
			// What passing or logging a wrong set of packets leads to
			// cannot be bounded: deny everything that reaches the rule.
			// (Later rules of the same IP version are unreachable.)
			h = Denied
			out = append(out, Rule{Action: v3.Deny, Index: i, IPVersion: r.IPVersion})
		}
		for _, f := range faults {
			bad = append(bad, Unrenderable{
				Kind: owner.kind, Namespace: owner.namespace, Name: owner.name, Direction: owner.direction,
				Rule: i, Action: rules[i].Action, Handling: h, Reason: f.reason, Detail: f.err.Error(),
			})
		}
	}
	return out, bad
}

// convertRule converts one rule. Each part that cannot be rendered is
// left out of the result (which then matches more packets) and returned
// as a fault.
func convertRule(r *v3.Rule, ns string, svc bool, demands map[string]*demand) (Rule, []fault) {
	out := Rule{Action: r.Action}
	var faults []fault
	fail := func(reason string, err error) { faults = append(faults, fault{reason, err}) }
	switch r.Action {
	case v3.Allow, v3.Deny, v3.Log, v3.Pass:
	default:
		fail(ReasonAction, fmt.Errorf("action %q is not supported", r.Action))
	}
	if r.HTTP != nil {
		fail(ReasonHTTP, fmt.Errorf("http matches need an L7 proxy, which felix does not run"))
	}
	if r.IPVersion != nil {
		if v := *r.IPVersion; v == 4 || v == 6 {
			out.IPVersion = v
		} else {
			fail(ReasonIPVersion, fmt.Errorf("ipVersion %d is not 4 or 6", v))
		}
	}
	if r.Protocol != nil {
		if err := r.Protocol.Validate(); err != nil {
			fail(ReasonProtocol, fmt.Errorf("protocol: %w", err))
		} else {
			out.Protocol = r.Protocol.Number()
		}
	}
	if r.NotProtocol != nil {
		if err := r.NotProtocol.Validate(); err != nil {
			fail(ReasonProtocol, fmt.Errorf("notProtocol: %w", err))
		} else {
			out.NotProtocol = r.NotProtocol.Number()
		}
	}
	icmpVersion := 0
	if out.Protocol != 0 && r.Protocol.IsICMP() {
		icmpVersion = 4
	} else if out.Protocol != 0 && r.Protocol.IsICMPv6() {
		icmpVersion = 6
	}
	if icmpVersion != 0 && out.IPVersion != 0 && out.IPVersion != icmpVersion {
		fail(ReasonProtocol, fmt.Errorf("protocol %s contradicts ipVersion %d", r.Protocol, out.IPVersion))
		out.Protocol, icmpVersion = 0, 0
	}
	if icmpVersion != 0 {
		out.IPVersion = icmpVersion
	}
	if r.ICMP != nil || r.NotICMP != nil {
		if icmpVersion == 0 {
			fail(ReasonICMP, fmt.Errorf("icmp matches need protocol ICMP or ICMPv6"))
		} else {
			var err error
			if out.ICMP, err = convertICMP(r.ICMP); err != nil {
				fail(ReasonICMP, fmt.Errorf("icmp: %w", err))
			}
			if out.NotICMP, err = convertICMP(r.NotICMP); err != nil {
				fail(ReasonICMP, fmt.Errorf("notICMP: %w", err))
			}
		}
	}
	var fs []fault
	out.Src, fs = convertEntity(&r.Source, ns, out.Protocol, srcSide, svc, demands)
	for _, f := range fs {
		fail(f.reason, fmt.Errorf("source: %w", f.err))
	}
	out.Dst, fs = convertEntity(&r.Destination, ns, out.Protocol, dstSide, svc, demands)
	for _, f := range fs {
		fail(f.reason, fmt.Errorf("destination: %w", f.err))
	}
	return out, faults
}

func convertICMP(f *v3.ICMPFields) (*ICMPMatch, error) {
	if f == nil {
		return nil, nil
	}
	if f.Type == nil {
		if f.Code != nil {
			return nil, fmt.Errorf("a code needs a type")
		}
		return nil, nil
	}
	if *f.Type < 0 || *f.Type > 254 || (f.Code != nil && (*f.Code < 0 || *f.Code > 255)) {
		return nil, fmt.Errorf("type or code out of range")
	}
	m := &ICMPMatch{Type: *f.Type}
	if f.Code != nil {
		c := *f.Code
		m.Code = &c
	}
	return m, nil
}

// convertEntity converts one side of a rule; a part that cannot be
// rendered is left out and returned as a fault.
func convertEntity(e *v3.EntityRule, ns string, proto uint8, side ruleSide, svc bool, demands map[string]*demand) (EntityMatch, []fault) {
	var m EntityMatch
	var faults []fault
	fail := func(reason string, err error) { faults = append(faults, fault{reason, err}) }
	var err error
	if m.Nets, m.NetSet, err = netMatch(e.Nets, false, demands); err != nil {
		fail(ReasonNets, fmt.Errorf("nets: %w", err))
	}
	// A negated net always gets a set too: iptables allows one -s per
	// rule, and the renderer needs it when a positive net takes the -s.
	if m.NotNets, m.NotNetSet, err = netMatch(e.NotNets, true, demands); err != nil {
		fail(ReasonNets, fmt.Errorf("notNets: %w", err))
	}
	if e.Services != nil {
		if m.SvcSet, err = serviceMatch(e.Services, ns, side, svc, demands); err != nil {
			fail(ReasonServices, err)
		}
	}
	posSel, fs := labelMatch(e, ns, &m, demands)
	faults = append(faults, fs...)
	if m.Ports, m.NamedPortSets, err = portMatch(e.Ports, proto, posSel, demands); err != nil {
		fail(ReasonPorts, fmt.Errorf("ports: %w", err))
	} else {
		m.HasPortConstraint = len(e.Ports) > 0
	}
	if m.NotPorts, m.NotNamedPortSets, err = portMatch(e.NotPorts, proto, posSel, demands); err != nil {
		fail(ReasonPorts, fmt.Errorf("notPorts: %w", err))
	}
	return m, faults
}

// labelMatch converts the label part of one side of a rule (selector,
// notSelector, namespaceSelector, serviceAccounts) into m's selector sets
// and returns the matcher of the endpoints its positive side selects (for
// named ports). Calico scopes a namespaced policy's rule selectors to the
// policy's namespace unless the rule has a namespaceSelector, which
// replaces the namespace scope.
func labelMatch(e *v3.EntityRule, ns string, m *EntityMatch, demands map[string]*demand) (*matcher, []fault) {
	var faults []fault
	scope := ns
	if e.NamespaceSelector != "" {
		scope = ""
	}
	var saSel string
	var saNames []string
	if sa := e.ServiceAccounts; sa != nil {
		saSel = sa.Selector
		if len(sa.Names) > 0 {
			saNames = sa.Names
		}
	}
	posSel := allMatcher()
	if e.Selector != "" || e.NamespaceSelector != "" || saSel != "" || saNames != nil {
		if sel, err := newMatcher(e.Selector, scope, e.NamespaceSelector, saSel, saNames); err != nil {
			faults = append(faults, fault{ReasonSelector, err})
		} else {
			posSel = sel
			m.SelSet = sel.id
			demands[sel.id] = &demand{id: sel.id, typ: HashNet, sel: sel}
		}
	}
	if e.NotSelector != "" {
		if not, err := newMatcher(e.NotSelector, scope, e.NamespaceSelector, "", nil); err != nil {
			faults = append(faults, fault{ReasonSelector, fmt.Errorf("notSelector: %w", err)})
		} else {
			m.NotSelSet = not.id
			demands[not.id] = &demand{id: not.id, typ: HashNet, sel: not}
		}
	}
	return posSel, faults
}

// portMatch converts a list of ports: numbers and ranges, and named
// ports as sets of the endpoints sel selects with that port. It
// registers its named-port sets only when the whole list converts.
func portMatch(ports []numorstring.Port, proto uint8, sel *matcher, demands map[string]*demand) ([]PortRange, []string, error) {
	var ranges []PortRange
	var named []string
	sets := map[string]*demand{}
	for _, p := range ports {
		if p.IsNamed() {
			// Without a protocol, the set holds the named port of every
			// protocol (a ClusterNetworkPolicy's destinationNamedPort).
			id := shortID("n:", fmt.Sprintf("%s\x00%d\x00%s", sel.id, proto, p.PortName))
			sets[id] = &demand{id: id, typ: HashIPPort, sel: sel, proto: proto, portName: p.PortName}
			named = append(named, id)
			continue
		}
		if p.MinPort == 0 && p.MaxPort == 0 || p.MinPort > p.MaxPort {
			return nil, nil, fmt.Errorf("port %q is not a port or range", p.String())
		}
		ranges = append(ranges, PortRange{Min: p.MinPort, Max: p.MaxPort})
	}
	if (len(ranges) > 0 || len(named) > 0 && proto != 0) && !portProto(proto) {
		return nil, nil, fmt.Errorf("ports need protocol TCP, UDP, SCTP or UDPLite")
	}
	maps.Copy(demands, sets)
	slices.Sort(named)
	return ranges, slices.Compact(named), nil
}

func portProto(p uint8) bool { return p == 6 || p == 17 || p == 132 || p == 136 }

func netMatch(ss []string, alwaysSet bool, demands map[string]*demand) ([]netip.Prefix, string, error) {
	if len(ss) == 0 {
		return nil, "", nil
	}
	nets, err := parseNets(ss)
	if err != nil {
		return nil, "", err
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	nets = slices.Compact(nets)
	if len(nets) == 1 && !alwaysSet {
		return nets, "", nil
	}
	var b strings.Builder
	for _, n := range nets {
		b.WriteString(n.String())
		b.WriteByte(',')
	}
	id := shortID("c:", b.String())
	demands[id] = &demand{id: id, typ: HashNet, nets: nets}
	return nets, id, nil
}
