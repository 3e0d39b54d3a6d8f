package v3

import (
	"strings"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/tabbynet/tabby/api/numorstring"
)

// polRuleScope says where a list of rules sits, for the checks that depend
// on it.
// +kubebuilder:object:generate=false
type polRuleScope struct {
	// inPolicy is true for (Global)NetworkPolicy rules and false for
	// Profile rules, which Calico checks only rule by rule.
	inPolicy bool
	// egress is true for egress rules.
	egress bool
	// global is true for GlobalNetworkPolicy, where a service match must
	// name its namespace.
	global bool
}

const (
	polMaxNets          = 256
	polMaxPorts         = 50
	polMaxHTTPItems     = 20
	polMaxHTTPPathBytes = 1024
)

// polValidateRules validates each rule of a list.
func polValidateRules(p Path, rules []Rule, scope polRuleScope) ErrorList {
	var errs ErrorList
	for i := range rules {
		errs.Extend(rules[i].validate(p.Index(i), scope))
	}
	return errs
}

// validate checks one rule as Calico does, plus the placement checks that
// depend on scope.
func (r *Rule) validate(p Path, scope polRuleScope) ErrorList {
	var errs ErrorList

	switch r.Action {
	case Allow, Deny, Log, Pass:
	case "":
		errs.Add(p.Child("action"), "is required: use Allow, Deny, Log or Pass")
	default:
		errs.Addf(p.Child("action"), "%q is not an action: use Allow, Deny, Log or Pass", r.Action)
	}

	if r.IPVersion != nil && *r.IPVersion != 4 && *r.IPVersion != 6 {
		errs.Addf(p.Child("ipVersion"), "%d is not an IP version: use 4 or 6", *r.IPVersion)
	}
	if r.Protocol != nil {
		if err := r.Protocol.Validate(); err != nil {
			errs.Add(p.Child("protocol"), err.Error())
		}
	}
	if r.NotProtocol != nil {
		if err := r.NotProtocol.Validate(); err != nil {
			errs.Add(p.Child("notProtocol"), err.Error())
		}
	}

	r.checkPorts(p, &errs)
	r.checkICMP(p, &errs)
	r.checkNets(p, &errs)
	r.checkHTTP(p, scope, &errs)
	r.checkServices(p, scope, &errs)

	errs.Extend(r.Source.validate(p.Child("source")))
	errs.Extend(r.Destination.validate(p.Child("destination")))

	if r.Metadata != nil {
		polCheckAnnotations(p.Child("metadata").Child("annotations"), r.Metadata.Annotations, &errs)
	}
	return errs
}

// protocolText describes the rule's protocol for error messages.
func (r *Rule) protocolText() string {
	if r.Protocol == nil {
		return "not set"
	}
	return r.Protocol.String()
}

// checkPorts: as Calico's validateRule, a rule without a protocol may
// match named ports only (a named port carries its own protocol), and a
// rule whose protocol has no ports may match none; each port must be a
// real port (1-65535) or a well-ordered range. (Calico's narrower rules,
// UDPLite without ports and port names by Kubernetes' rules, are checked
// on write: see WriteRules.)
func (r *Rule) checkPorts(p Path, errs *ErrorList) {
	lists := []struct {
		path  Path
		ports []numorstring.Port
	}{
		{p.Child("source").Child("ports"), r.Source.Ports},
		{p.Child("source").Child("notPorts"), r.Source.NotPorts},
		{p.Child("destination").Child("ports"), r.Destination.Ports},
		{p.Child("destination").Child("notPorts"), r.Destination.NotPorts},
	}
	for _, l := range lists {
		if len(l.ports) == 0 {
			continue
		}
		switch {
		case r.Protocol == nil && !allPortsNamed(l.ports):
			errs.Add(l.path, "rules with numeric port or port range must set protocol to TCP or UDP or SCTP (protocol is not set)")
		case r.Protocol != nil && !r.Protocol.SupportsPorts():
			errs.Addf(l.path, "rules that specify ports must set protocol to TCP or UDP or SCTP (protocol is %s)", r.protocolText())
		}
		if len(l.ports) > polMaxPorts {
			errs.Addf(l.path, "has %d entries, more than the %d allowed", len(l.ports), polMaxPorts)
		}
		for i, port := range l.ports {
			polCheckPort(l.path.Index(i), port, errs)
		}
	}
}

func allPortsNamed(ports []numorstring.Port) bool {
	for _, p := range ports {
		if p.PortName == "" {
			return false
		}
	}
	return true
}

// polCheckPort checks one numorstring.Port as Calico's validatePort does:
// a name carries no numbers, a range is ordered and within 1-65535.
func polCheckPort(p Path, port numorstring.Port, errs *ErrorList) {
	switch {
	case port.PortName != "":
		if port.MinPort != 0 || port.MaxPort != 0 {
			errs.Addf(p, "named port %q cannot also carry port numbers", port.PortName)
		}
	case port.MinPort > port.MaxPort:
		errs.Addf(p, "port range %d:%d has its minimum above its maximum", port.MinPort, port.MaxPort)
	case port.MinPort < 1:
		errs.Addf(p, "port %s is not allowed: ports are 1-65535", port.String())
	}
}

// checkICMP: ICMP matches need protocol ICMP or ICMPv6, the type and code
// must be in range (code only with a type), and an ICMP(v6) protocol fixes
// the IP version.
func (r *Rule) checkICMP(p Path, errs *ErrorList) {
	isICMP := r.Protocol != nil && (r.Protocol.IsICMP() || r.Protocol.IsICMPv6())
	for _, f := range []struct {
		name   string
		fields *ICMPFields
	}{{"icmp", r.ICMP}, {"notICMP", r.NotICMP}} {
		if f.fields == nil {
			continue
		}
		fp := p.Child(f.name)
		// Calico checks this for icmp only; Tabby checks notICMP too, since
		// an ICMP type match cannot be rendered without the ICMP protocol.
		if !isICMP {
			errs.Addf(fp, "matching ICMP fields needs protocol ICMP or ICMPv6 (protocol is %s)", r.protocolText())
		}
		f.fields.validate(fp, errs)
	}

	if r.IPVersion == nil {
		return
	}
	for _, pr := range []struct {
		name  string
		proto *numorstring.Protocol
	}{{"protocol", r.Protocol}, {"notProtocol", r.NotProtocol}} {
		if pr.proto == nil {
			continue
		}
		if pr.proto.IsICMP() && *r.IPVersion != 4 {
			errs.Addf(p.Child("ipVersion"), "%d does not fit %s %s: use ipVersion 4 (or ICMPv6 for IPv6)", *r.IPVersion, pr.name, pr.proto)
		}
		if pr.proto.IsICMPv6() && *r.IPVersion != 6 {
			errs.Addf(p.Child("ipVersion"), "%d does not fit %s %s: use ipVersion 6 (or ICMP for IPv4)", *r.IPVersion, pr.name, pr.proto)
		}
	}
}

func (f *ICMPFields) validate(p Path, errs *ErrorList) {
	if f.Type != nil && (*f.Type < 0 || *f.Type > 254) {
		errs.Addf(p.Child("type"), "%d is outside 0-254", *f.Type)
	}
	if f.Code != nil {
		if *f.Code < 0 || *f.Code > 255 {
			errs.Addf(p.Child("code"), "%d is outside 0-255", *f.Code)
		}
		if f.Type == nil {
			errs.Add(p.Child("code"), "needs a type: an ICMP code can only be matched together with its type")
		}
	}
}

// checkNets: every net is a valid, correctly masked CIDR (or bare IP) and
// the nets agree with ipVersion. (Calico's write-time rules, no bare IP,
// no catch-all notNets and no rule mixing IPv4 and IPv6 nets, are in
// WriteRules.)
func (r *Rule) checkNets(p Path, errs *ErrorList) {
	for _, l := range []struct {
		path Path
		nets []string
	}{
		{p.Child("source").Child("nets"), r.Source.Nets},
		{p.Child("source").Child("notNets"), r.Source.NotNets},
		{p.Child("destination").Child("nets"), r.Destination.Nets},
		{p.Child("destination").Child("notNets"), r.Destination.NotNets},
	} {
		if len(l.nets) > polMaxNets {
			errs.Addf(l.path, "has %d entries, more than the %d allowed", len(l.nets), polMaxNets)
		}
		for i, n := range l.nets {
			v := polParseNet(l.path.Index(i), n, errs)
			if v == 0 {
				continue
			}
			if r.IPVersion != nil && (*r.IPVersion == 4 || *r.IPVersion == 6) && v != *r.IPVersion {
				errs.Addf(l.path.Index(i), "%q is IPv%d but the rule's ipVersion is %d", n, v, *r.IPVersion)
			}
		}
	}
}

// checkHTTP: HTTP matches are for Allow rules on TCP (or no protocol), on
// ingress, with non-empty distinct methods and well-formed paths.
func (r *Rule) checkHTTP(p Path, scope polRuleScope, errs *ErrorList) {
	if r.HTTP == nil {
		return
	}
	hp := p.Child("http")
	if r.Protocol != nil && r.Protocol.Number() != 6 {
		errs.Addf(hp, "matching HTTP needs protocol TCP or no protocol (protocol is %s)", r.Protocol)
	}
	if r.Action != Allow {
		errs.Addf(hp, "HTTP matches are only allowed in Allow rules (action is %q)", r.Action)
	}
	if scope.inPolicy && scope.egress {
		errs.Add(hp, "HTTP matches are not allowed in egress rules")
	}

	mp := hp.Child("methods")
	if len(r.HTTP.Methods) > polMaxHTTPItems {
		errs.Addf(mp, "has %d entries, more than the %d allowed", len(r.HTTP.Methods), polMaxHTTPItems)
	}
	seen := map[string]bool{}
	for i, m := range r.HTTP.Methods {
		switch {
		case strings.TrimSpace(m) == "":
			errs.Add(mp.Index(i), "must not be empty")
		case seen[m]:
			errs.Addf(mp.Index(i), "%q is listed more than once", m)
		}
		seen[m] = true
	}

	pp := hp.Child("paths")
	if len(r.HTTP.Paths) > polMaxHTTPItems {
		errs.Addf(pp, "has %d entries, more than the %d allowed", len(r.HTTP.Paths), polMaxHTTPItems)
	}
	for i, path := range r.HTTP.Paths {
		ip := pp.Index(i)
		switch {
		case path.Exact != "" && path.Prefix != "":
			errs.Add(ip, "set exactly one of exact and prefix, not both")
			continue
		case path.Exact == "" && path.Prefix == "":
			errs.Add(ip, "set exactly one of exact and prefix")
			continue
		}
		field, v := "exact", path.Exact
		if v == "" {
			field, v = "prefix", path.Prefix
		}
		if len(v) > polMaxHTTPPathBytes {
			errs.Addf(ip.Child(field), "is %d bytes long, more than the %d allowed", len(v), polMaxHTTPPathBytes)
		}
		if !strings.HasPrefix(v, "/") || strings.ContainsAny(v, "? #") {
			errs.Addf(ip.Child(field), "%q is not a valid path: it must start with '/' and contain no '?', '#' or space", v)
		}
	}
}

// checkServices: a destination service match brings its own ports, and in a
// policy service matches go only in an ingress source or an egress
// destination (with a namespace in a GlobalNetworkPolicy).
func (r *Rule) checkServices(p Path, scope polRuleScope, errs *ErrorList) {
	dst := p.Child("destination")
	if r.Destination.Services != nil {
		if len(r.Destination.Ports) != 0 {
			errs.Add(dst.Child("ports"), "cannot be combined with destination.services: a service match uses the service's own ports")
		}
		if len(r.Destination.NotPorts) != 0 {
			errs.Add(dst.Child("notPorts"), "cannot be combined with destination.services: a service match uses the service's own ports")
		}
	}
	if !scope.inPolicy {
		return
	}
	src := p.Child("source")
	if scope.egress && r.Source.Services != nil {
		errs.Add(src.Child("services"), "not allowed in an egress rule's source: match services in the destination")
	}
	if !scope.egress && r.Destination.Services != nil {
		errs.Add(dst.Child("services"), "not allowed in an ingress rule's destination: match services in the source")
	}
	if scope.global {
		if s := r.Source.Services; !scope.egress && s != nil && s.Namespace == "" {
			errs.Add(src.Child("services").Child("namespace"), "is required in a GlobalNetworkPolicy")
		}
		if s := r.Destination.Services; scope.egress && s != nil && s.Namespace == "" {
			errs.Add(dst.Child("services").Child("namespace"), "is required in a GlobalNetworkPolicy")
		}
	}
}

// validate checks the selectors and the service and service-account matches
// of one end of a rule. Nets and ports are checked by the rule, which knows
// the protocol and IP version.
func (e *EntityRule) validate(p Path) ErrorList {
	var errs ErrorList
	polCheckSelector(p.Child("selector"), e.Selector, &errs)
	polCheckNoGlobal(p.Child("selector"), e.Selector, &errs)
	polCheckSelector(p.Child("notSelector"), e.NotSelector, &errs)
	polCheckSelector(p.Child("namespaceSelector"), e.NamespaceSelector, &errs)
	if ns := e.NamespaceSelector; strings.Contains(ns, "global(") && strings.Join(strings.Fields(ns), "") != "global()" {
		errs.Addf(p.Child("namespaceSelector"), "global() cannot be combined with other selectors (got %q)", ns)
	}

	if s := e.Services; s != nil {
		sp := p.Child("services")
		if s.Name == "" {
			errs.Add(sp.Child("name"), "is required")
		} else {
			polCheckName(sp.Child("name"), s.Name, &errs)
		}
		if s.Namespace != "" {
			polCheckName(sp.Child("namespace"), s.Namespace, &errs)
		}
		if e.NamespaceSelector != "" {
			errs.Add(sp, "cannot be combined with namespaceSelector")
		}
		if e.Selector != "" || e.NotSelector != "" {
			errs.Add(sp, "cannot be combined with selector or notSelector")
		}
		if e.ServiceAccounts != nil {
			errs.Add(sp, "cannot be combined with serviceAccounts")
		}
		if len(e.Nets) != 0 || len(e.NotNets) != 0 {
			errs.Add(sp, "cannot be combined with nets or notNets: a service match uses the service's endpoint addresses")
		}
	}

	if sa := e.ServiceAccounts; sa != nil {
		polCheckSelector(p.Child("serviceAccounts").Child("selector"), sa.Selector, &errs)
	}
	return errs
}

// polCheckAnnotations checks annotation keys (qualified names, as Calico
// checks them) and their total size.
func polCheckAnnotations(p Path, annotations map[string]string, errs *ErrorList) {
	total := 0
	for k, v := range annotations {
		for _, msg := range k8svalidation.IsQualifiedName(strings.ToLower(k)) {
			errs.Addf(p.Key(k), "invalid annotation key: %s", msg)
		}
		total += len(k) + len(v)
	}
	if total > polMaxAnnotationBytes {
		errs.Addf(p, "annotations total %d bytes, more than the %d allowed", total, polMaxAnnotationBytes)
	}
}
