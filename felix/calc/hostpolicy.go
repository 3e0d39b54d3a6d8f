package calc

import v3 "github.com/tabbynet/tabby/api/v3"

// policyKind is how a policy applies to host endpoints.
type policyKind uint8

const (
	policyNormal    policyKind = iota
	policyForward              // normal, and applyOnForward
	policyPreDNAT              // preDNAT (implies applyOnForward)
	policyUntracked            // doNotTrack (implies applyOnForward)
)

func globalPolicyKind(s *v3.GlobalNetworkPolicySpec) policyKind {
	switch {
	case s.DoNotTrack:
		return policyUntracked
	case s.PreDNAT:
		return policyPreDNAT
	case s.ApplyOnForward:
		return policyForward
	}
	return policyNormal
}

// addToEndpoint appends p to the tier lists of ep it belongs in.
func addToEndpoint(ep *Endpoint, p *parsedPolicy) {
	in, out := &ep.Ingress, &ep.Egress
	switch {
	case p.kind == policyNormal || p.kind == policyForward:
		if ep.Kind == Host && p.kind == policyForward {
			if p.ingress {
				ep.ForwardIngress = appendTier(ep.ForwardIngress, p)
			}
			if p.egress {
				ep.ForwardEgress = appendTier(ep.ForwardEgress, p)
			}
		}
	case ep.Kind != Host:
		return // preDNAT and doNotTrack policies apply to host endpoints only
	case p.kind == policyPreDNAT:
		in, out = &ep.PreDNATIngress, nil
	case ep.Interface == "*":
		return // as Calico: all-interfaces host endpoints take no untracked policy
	default:
		in, out = &ep.UntrackedIngress, &ep.UntrackedEgress
	}
	if p.ingress {
		*in = appendTier(*in, p)
	}
	if p.egress && out != nil {
		*out = appendTier(*out, p)
	}
}
