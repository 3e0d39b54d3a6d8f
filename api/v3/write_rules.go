package v3

import (
	"net"
	"strings"

	"github.com/tabbynet/tabby/api/numorstring"
)

// WriteRules lists what of r Calico refuses when it is written (by its
// validator, its CRD schemas or clientv3) but Tabby still reads from the
// store: felix keeps enforcing an object an older Tabby, a Calico
// component or a direct write stored, instead of dropping it. Every write
// runs them (datastore.PrepareWrite, DefaultAndValidate,
// DefaultValidateForWrite). See VALIDATION.md.
func WriteRules(r Resource) ErrorList {
	var errs ErrorList
	polCheckAnnotations(Path("metadata").Child("annotations"), r.GetAnnotations(), &errs)
	sp := Path("spec")
	rules := func(name string, rs []Rule) {
		for i := range rs {
			rs[i].writeRules(sp.Child(name).Index(i), &errs)
		}
	}
	switch o := r.(type) {
	case *NetworkPolicy:
		rules("ingress", o.Spec.Ingress)
		rules("egress", o.Spec.Egress)
	case *GlobalNetworkPolicy:
		rules("ingress", o.Spec.Ingress)
		rules("egress", o.Spec.Egress)
	case *StagedNetworkPolicy:
		rules("ingress", o.Spec.Ingress)
		rules("egress", o.Spec.Egress)
	case *StagedGlobalNetworkPolicy:
		rules("ingress", o.Spec.Ingress)
		rules("egress", o.Spec.Egress)
	case *Profile:
		rules("ingress", o.Spec.Ingress)
		rules("egress", o.Spec.Egress)
	case *HostEndpoint:
		for i := range o.Spec.Ports {
			endpointPortWriteRules(sp.Child("ports").Index(i).Child("protocol"), o.Spec.Ports[i].Protocol, &errs)
		}
	case *WorkloadEndpoint:
		errs.Extend(o.validateName())
		for i := range o.Spec.Ports {
			endpointPortWriteRules(sp.Child("ports").Index(i).Child("protocol"), o.Spec.Ports[i].Protocol, &errs)
		}
	case *IPReservation:
		// Calico's schema gives the items format "cidr" (net.ParseCIDR).
		for i, c := range o.Spec.ReservedCIDRs {
			if !strings.Contains(c, "/") && net.ParseIP(c) != nil {
				errs.Addf(sp.Child("reservedCIDRs").Index(i), "%q should match 'cidr': write it with its prefix length (%s/%d)", c, c, hostPrefixLen(c))
			}
		}
	}
	return errs
}

// writeRules are Calico's rule checks beyond Rule.validate: protocol
// names spelled exactly, ports only for TCP, UDP and SCTP, port names by
// Kubernetes' rules, nets written as CIDRs, no catch-all notNets, and no
// rule mixing IPv4 and IPv6 nets. (Calico's own conversion of a
// ClusterNetworkPolicy writes such a rule for networks of both versions,
// and its felix matches each IP version's nets in that version's chains:
// so does Tabby's.)
func (r *Rule) writeRules(p Path, errs *ErrorList) {
	r.oneIPVersion(p, errs)
	for _, pr := range []struct {
		name  string
		proto *numorstring.Protocol
	}{{"protocol", r.Protocol}, {"notProtocol", r.NotProtocol}} {
		if pr.proto == nil || pr.proto.Validate() != nil {
			continue // reported by Validate
		}
		if err := pr.proto.ValidateCanonical(); err != nil {
			errs.Add(p.Child(pr.name), err.Error())
		}
	}
	for _, side := range []struct {
		name string
		e    *EntityRule
	}{{"source", &r.Source}, {"destination", &r.Destination}} {
		sp := p.Child(side.name)
		for _, l := range []struct {
			name  string
			ports []numorstring.Port
		}{{"ports", side.e.Ports}, {"notPorts", side.e.NotPorts}} {
			if len(l.ports) > 0 && r.Protocol != nil && r.Protocol.SupportsPorts() && !protocolHasPorts(*r.Protocol) {
				errs.Addf(sp.Child(l.name), "rules that specify ports must set protocol to TCP or UDP or SCTP (protocol is %s)", r.protocolText())
			}
			for i, port := range l.ports {
				if port.PortName != "" {
					polCheckPortName(sp.Child(l.name).Index(i), port.PortName, errs)
				}
			}
		}
		for _, l := range []struct {
			name    string
			nets    []string
			negated bool
		}{{"nets", side.e.Nets, false}, {"notNets", side.e.NotNets, true}} {
			for i, n := range l.nets {
				np := sp.Child(l.name).Index(i)
				switch {
				case !strings.Contains(n, "/"):
					if net.ParseIP(n) != nil {
						errs.Addf(np, "%q: invalid CIDR: write it with its prefix length (%s/%d)", n, n, hostPrefixLen(n))
					}
				case l.negated && isCatchAll(n):
					errs.Addf(np, "%q: catch-all CIDR in negation creates logical contradiction (matches no traffic)", n)
				}
			}
		}
	}
}

// oneIPVersion: a rule's nets (both sides, negated or not) are all IPv4 or
// all IPv6.
func (r *Rule) oneIPVersion(p Path, errs *ErrorList) {
	seen := map[int]bool{}
	for _, l := range []struct {
		path Path
		nets []string
	}{
		{p.Child("source").Child("nets"), r.Source.Nets},
		{p.Child("source").Child("notNets"), r.Source.NotNets},
		{p.Child("destination").Child("nets"), r.Destination.Nets},
		{p.Child("destination").Child("notNets"), r.Destination.NotNets},
	} {
		for i, n := range l.nets {
			v := netVersion(n)
			if seen[10-v] { // 10-4 == 6, 10-6 == 4: the other version
				errs.Addf(l.path.Index(i), "%q is IPv%d but the rule also matches IPv%d nets: use one rule per IP version", n, v, 10-v)
			}
			seen[v] = true
		}
	}
}

// endpointPortWriteRules: an endpoint port's protocol spelled exactly, and
// one Calico allows ports on (TCP, UDP, SCTP).
func endpointPortWriteRules(p Path, proto numorstring.Protocol, errs *ErrorList) {
	if proto.Validate() != nil || !proto.SupportsPorts() {
		return // reported by Validate
	}
	if err := proto.ValidateCanonical(); err != nil {
		errs.Add(p, err.Error())
	} else if !protocolHasPorts(proto) {
		errs.Addf(p, "%s: protocol does not support ports: use TCP, UDP or SCTP", proto)
	}
}

// hostPrefixLen is 32 for an IPv4 address, 128 otherwise.
func hostPrefixLen(ip string) int {
	if strings.Contains(ip, ":") {
		return 128
	}
	return 32
}

// isCatchAll reports what Calico counts as a catch-all in notNets: the
// IPv4 string "0.0.0.0/0" exactly, or any spelling of ::/0 ("0:0::/0").
func isCatchAll(n string) bool {
	if n == "0.0.0.0/0" {
		return true
	}
	ip, ipn, err := net.ParseCIDR(n)
	if err != nil || ip.To4() != nil {
		return false
	}
	ones, _ := ipn.Mask.Size()
	return ones == 0 && ipn.IP.Equal(net.IPv6zero)
}

// protocolHasPorts is Calico's Protocol.SupportsPorts: TCP, UDP and SCTP
// (by name or number). UDPLite has ports, but Calico does not match them.
func protocolHasPorts(p numorstring.Protocol) bool {
	switch p.Number() {
	case 6, 17, 132:
		return true
	}
	return false
}
