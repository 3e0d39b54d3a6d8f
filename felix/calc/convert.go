package calc

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
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
}

// members computes the set's content; matches says which of all d.sel
// matches (nil for a CIDR set).
func (d *demand) members(all []labelled, matches []bool) *IPSet {
	set := &IPSet{ID: d.id, Type: d.typ}
	add := func(s string) { set.Members = append(set.Members, s) }
	switch {
	case d.nets != nil:
		for _, n := range d.nets {
			add(n.String())
		}
	case d.typ == HashNet:
		for i := range all {
			if matches[i] {
				for _, n := range all[i].netStrs {
					add(n)
				}
			}
		}
	default:
		// ip,proto:port members, built by hand: fmt.Sprintf here was most
		// of a membership change's cost at 5,000 endpoints.
		proto := protoName(d.proto)
		var buf []byte
		for i := range all {
			m := &all[i]
			var port uint16
			for _, p := range m.ports {
				if p.name == d.portName && p.proto == d.proto {
					port = p.port
					break
				}
			}
			if port == 0 || !matches[i] {
				continue
			}
			for _, n := range m.nets {
				if n.IsSingleIP() {
					buf = n.Addr().AppendTo(buf[:0])
					buf = append(append(append(buf, ','), proto...), ':')
					add(string(strconv.AppendUint(buf, uint64(port), 10)))
				}
			}
		}
	}
	// Sorted, without repeats (two endpoints may share an address).
	slices.Sort(set.Members)
	set.Members = slices.Clip(slices.Compact(set.Members))
	return set
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

// convertRules resolves a policy's or profile's rules in the namespace scope
// ns ("" for global). The ipsets the rules need are registered only if every
// rule converts.
func (c *computer) convertRules(rules []v3.Rule, ns string) ([]Rule, error) {
	local := map[string]*demand{}
	var out []Rule
	for i := range rules {
		r, err := convertRule(&rules[i], ns, local)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		out = append(out, r)
	}
	maps.Copy(c.demands, local)
	return out, nil
}

func convertRule(r *v3.Rule, ns string, demands map[string]*demand) (Rule, error) {
	out := Rule{Action: r.Action}
	switch r.Action {
	case v3.Allow, v3.Deny, v3.Log, v3.Pass:
	default:
		return out, fmt.Errorf("action %q is not supported", r.Action)
	}
	if r.HTTP != nil {
		return out, fmt.Errorf("http matches need an L7 proxy and are not supported")
	}
	if r.IPVersion != nil {
		out.IPVersion = *r.IPVersion
	}
	if r.Protocol != nil {
		if err := r.Protocol.Validate(); err != nil {
			return out, err
		}
		out.Protocol = r.Protocol.Number()
	}
	if r.NotProtocol != nil {
		if err := r.NotProtocol.Validate(); err != nil {
			return out, err
		}
		out.NotProtocol = r.NotProtocol.Number()
	}
	icmpVersion := 0
	if r.Protocol != nil && r.Protocol.IsICMP() {
		icmpVersion = 4
	} else if r.Protocol != nil && r.Protocol.IsICMPv6() {
		icmpVersion = 6
	}
	if r.ICMP != nil || r.NotICMP != nil {
		if icmpVersion == 0 {
			return out, fmt.Errorf("icmp matches need protocol ICMP or ICMPv6")
		}
	}
	if icmpVersion != 0 {
		if out.IPVersion != 0 && out.IPVersion != icmpVersion {
			return out, fmt.Errorf("protocol %s contradicts ipVersion %d", r.Protocol, out.IPVersion)
		}
		out.IPVersion = icmpVersion
	}
	var err error
	if out.ICMP, err = convertICMP(r.ICMP); err != nil {
		return out, fmt.Errorf("icmp: %w", err)
	}
	if out.NotICMP, err = convertICMP(r.NotICMP); err != nil {
		return out, fmt.Errorf("notICMP: %w", err)
	}
	if out.Src, err = convertEntity(&r.Source, ns, out.Protocol, demands); err != nil {
		return out, fmt.Errorf("source: %w", err)
	}
	if out.Dst, err = convertEntity(&r.Destination, ns, out.Protocol, demands); err != nil {
		return out, fmt.Errorf("destination: %w", err)
	}
	return out, nil
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

func convertEntity(e *v3.EntityRule, ns string, proto uint8, demands map[string]*demand) (EntityMatch, error) {
	var m EntityMatch
	var err error
	if m.Nets, m.NetSet, err = netMatch(e.Nets, false, demands); err != nil {
		return m, fmt.Errorf("nets: %w", err)
	}
	// A negated net always gets a set too: iptables allows one -s per
	// rule, and the renderer needs it when a positive net takes the -s.
	if m.NotNets, m.NotNetSet, err = netMatch(e.NotNets, true, demands); err != nil {
		return m, fmt.Errorf("notNets: %w", err)
	}
	if e.Services != nil {
		return m, fmt.Errorf("services matches are not supported yet")
	}

	// The label part: Calico scopes a namespaced policy's rule selectors
	// to the policy's namespace unless the rule has a namespaceSelector.
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
	labelMatch := e.Selector != "" || e.NamespaceSelector != "" || saSel != "" || saNames != nil
	var posSel *matcher // the endpoints the positive side selects (for named ports)
	if labelMatch {
		if posSel, err = newMatcher(e.Selector, scope, e.NamespaceSelector, saSel, saNames); err != nil {
			return m, err
		}
		m.SelSet = posSel.id
		demands[posSel.id] = &demand{id: posSel.id, typ: HashNet, sel: posSel}
	} else if posSel, err = newMatcher("", "", "", "", nil); err != nil {
		return m, err
	}
	if e.NotSelector != "" {
		not, err := newMatcher(e.NotSelector, scope, e.NamespaceSelector, "", nil)
		if err != nil {
			return m, fmt.Errorf("notSelector: %w", err)
		}
		m.NotSelSet = not.id
		demands[not.id] = &demand{id: not.id, typ: HashNet, sel: not}
	}

	portSets := func(ports []numorstring.Port) ([]PortRange, []string, error) {
		var ranges []PortRange
		var named []string
		for _, p := range ports {
			if p.IsNamed() {
				if proto == 0 {
					return nil, nil, fmt.Errorf("named port %q needs a protocol", p.PortName)
				}
				id := shortID("n:", fmt.Sprintf("%s\x00%d\x00%s", posSel.id, proto, p.PortName))
				demands[id] = &demand{id: id, typ: HashIPPort, sel: posSel, proto: proto, portName: p.PortName}
				named = append(named, id)
				continue
			}
			if p.MinPort == 0 && p.MaxPort == 0 || p.MinPort > p.MaxPort {
				return nil, nil, fmt.Errorf("port %q is not a port or range", p.String())
			}
			ranges = append(ranges, PortRange{Min: p.MinPort, Max: p.MaxPort})
		}
		if (len(ranges) > 0 || len(named) > 0) && !portProto(proto) {
			return nil, nil, fmt.Errorf("ports need protocol TCP, UDP, SCTP or UDPLite")
		}
		slices.Sort(named)
		return ranges, slices.Compact(named), nil
	}
	if m.Ports, m.NamedPortSets, err = portSets(e.Ports); err != nil {
		return m, fmt.Errorf("ports: %w", err)
	}
	m.HasPortConstraint = len(e.Ports) > 0
	if m.NotPorts, m.NotNamedPortSets, err = portSets(e.NotPorts); err != nil {
		return m, fmt.Errorf("notPorts: %w", err)
	}
	return m, nil
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
