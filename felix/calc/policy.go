package calc

import (
	"cmp"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// parsedPolicy is a valid policy: its selector parsed and its rules
// converted (with the ipsets they need). tier is set once the policy is
// placed in its (existing) tier.
type parsedPolicy struct {
	id              PolicyID
	name            string // policyName(id), for sorting
	order           *float64
	tier            *tierInfo
	sel             *matcher
	ingress, egress bool
	// kind is how the policy applies to host endpoints (normal,
	// applyOnForward, preDNAT, doNotTrack).
	kind    policyKind
	in, out []Rule
	demands map[string]*demand
}

// policySpec is what the calculation reads of a NetworkPolicy or a
// GlobalNetworkPolicy.
type policySpec struct {
	kind, ns, name, tier string
	pk                   policyKind
	order                *float64
	sel, nsSel, saSel    string
	types                []v3.PolicyType
	in, out              []v3.Rule
}

// loadedPolicy is a policy object loaded: parsed (nil when invalid),
// independently of the tiers, so that a tier change places it again
// without parsing it again.
type loadedPolicy struct {
	parsed *parsedPolicy // tier unset
	// kind, ns and name are the object's; tier is the tier it names (the
	// default tier when none).
	kind, ns, name, tier string
	invalid              []Problem
	unrenderable         []Unrenderable
}

// loadPolicy loads a NetworkPolicy, GlobalNetworkPolicy or staged
// policy (named by StagedName, of its staged kind); svc says
// whether felix follows Kubernetes Services (see convertRules).
func loadPolicy(o any, svc bool) loadedPolicy {
	staged, isStaged := o.(*StagedPolicy)
	if isStaged {
		o = staged.Policy
	}
	s, ok, err := policySpecOf(o)
	if !ok {
		return loadedPolicy{}
	}
	if isStaged {
		s.kind, s.name = staged.Kind, StagedName(s.name)
	}
	if s.tier == "" {
		s.tier = v3.DefaultTierName
	}
	l := loadedPolicy{kind: s.kind, ns: s.ns, name: s.name, tier: s.tier}
	switch {
	case err != nil && isStaged:
		// Never enforced: skipping it opens nothing.
		l.invalid = []Problem{newProblem(s.kind, s.ns, s.name, "invalid, skipped: %v", err)}
	case err != nil:
		l.parsed, l.unrenderable = invalidPolicy(s, err)
	default:
		l.parsed, l.unrenderable = parsePolicy(s, svc)
	}
	return l
}

// invalidPolicy is how a policy that fails validation is enforced (one
// stored past the API's validation: by hand in the CRDs or etcd, or by
// an older version). Calico's felix skips it, which for a policy that
// denies is failing open; Tabby's denies all traffic, in the policy's
// directions, of the endpoints it may select (its selector where it
// parses, else the widest, as parsePolicy), at the policy's place in
// its tier, reported as an Unrenderable.
func invalidPolicy(s policySpec, err error) (*parsedPolicy, []Unrenderable) {
	p := newParsedPolicy(s)
	if !p.ingress && !p.egress { // only types felix does not know
		p.ingress, p.egress = true, true
	}
	m, selErr := newMatcher(s.sel, s.ns, s.nsSel, s.saSel, nil)
	if selErr != nil {
		m = widestMatcher(s.sel, s.ns, s.nsSel, s.saSel)
	}
	return deniesAll(p, s, m, ReasonInvalidPolicy, err)
}

// newParsedPolicy is s's policy with its identity, order, kind and
// directions; no selector or rules yet.
func newParsedPolicy(s policySpec) *parsedPolicy {
	id := PolicyID{Tier: s.tier, Namespace: s.ns, Name: s.name}
	p := &parsedPolicy{id: id, name: policyName(id), order: s.order, kind: s.pk, demands: map[string]*demand{}}
	p.ingress, p.egress = policyTypes(s.types, s.in, s.out)
	return p
}

// deniesAll makes p deny all traffic, in its directions, of what sel
// picks, and reports the whole policy as an Unrenderable for reason.
func deniesAll(p *parsedPolicy, s policySpec, sel *matcher, reason string, err error) (*parsedPolicy, []Unrenderable) {
	p.sel = sel
	deny := []Rule{{Action: v3.Deny}}
	p.in, p.out = deny, deny
	return p, []Unrenderable{{Kind: s.kind, Namespace: s.ns, Name: s.name,
		Rule: -1, Handling: Denied, Reason: reason, Detail: err.Error()}}
}

// policySpecOf reads a NetworkPolicy or GlobalNetworkPolicy (false for
// anything else) and validates it.
func policySpecOf(o any) (policySpec, bool, error) {
	switch o := o.(type) {
	case *v3.NetworkPolicy:
		p := &o.Spec
		return policySpec{kind: v3.KindNetworkPolicy, ns: o.Namespace, name: o.Name, tier: p.Tier, pk: policyNormal,
			order: p.Order, sel: p.Selector, saSel: p.ServiceAccountSelector, types: p.Types, in: p.Ingress, out: p.Egress}, true, o.Validate().Err()
	case *v3.GlobalNetworkPolicy:
		p := &o.Spec
		return policySpec{kind: v3.KindGlobalNetworkPolicy, name: o.Name, tier: p.Tier, pk: globalPolicyKind(p),
			order: p.Order, sel: p.Selector, nsSel: p.NamespaceSelector, saSel: p.ServiceAccountSelector,
			types: p.Types, in: p.Ingress, out: p.Egress}, true, o.Validate().Err()
	}
	return policySpec{}, false, nil
}

// place puts the loaded policy in its tier: the policy (nil when it is
// skipped: invalid, or its tier does not exist), its problems and the
// rules it cannot render (reported only for a policy in effect).
func (l *loadedPolicy) place(tiers map[string]*tierInfo) (*parsedPolicy, []Problem, []Unrenderable) {
	if l.parsed == nil {
		return nil, l.invalid, nil
	}
	ti, ok := tiers[l.tier]
	if !ok {
		return nil, []Problem{newProblem(l.kind, l.ns, l.name, "tier %q does not exist; policy skipped", l.tier)}, nil
	}
	p := *l.parsed
	p.tier = ti
	return &p, nil, l.unrenderable
}

// parsePolicy parses a valid policy's selector and converts its rules
// (see convertRules for the rules that cannot be rendered). When the
// selector cannot be parsed (validation should have refused it), which
// endpoints the policy selects is unknown: it then selects every endpoint
// of its namespace scope (narrowed by the parts of the selector that do
// parse) and denies all their traffic in its directions.
func parsePolicy(s policySpec, svc bool) (*parsedPolicy, []Unrenderable) {
	p := newParsedPolicy(s)
	m, err := newMatcher(s.sel, s.ns, s.nsSel, s.saSel, nil)
	if err != nil {
		return deniesAll(p, s, widestMatcher(s.sel, s.ns, s.nsSel, s.saSel), ReasonPolicySelector, err)
	}
	p.sel = m
	var badIn, badOut []Unrenderable
	p.in, badIn = convertRules(s.in, s.ns, ruleOwner{s.kind, s.ns, s.name, "ingress"}, svc, p.demands)
	p.out, badOut = convertRules(s.out, s.ns, ruleOwner{s.kind, s.ns, s.name, "egress"}, svc, p.demands)
	return p, append(badIn, badOut...)
}

// widestMatcher is the matcher of the parts of a policy selector that
// parse, within the namespace scope ns: a superset of what the whole
// selector would select.
func widestMatcher(sel, ns, nsSel, saSel string) *matcher {
	parsed := func(s string) string {
		if _, err := selector.Parse(s); err != nil {
			return ""
		}
		return s
	}
	if m, err := newMatcher(parsed(sel), ns, parsed(nsSel), parsed(saSel), nil); err == nil {
		return m
	}
	m, _ := newMatcher("", ns, "", "", nil) // parses nothing, cannot fail
	return m
}

// policyTypes mirrors Calico's defaulting: explicit types win; otherwise
// Ingress, plus Egress when there are egress rules (Egress alone when there
// are only egress rules).
func policyTypes(types []v3.PolicyType, in, out []v3.Rule) (ingress, egress bool) {
	if len(types) == 0 {
		switch {
		case len(out) == 0:
			return true, false
		case len(in) == 0:
			return false, true
		default:
			return true, true
		}
	}
	for _, t := range types {
		switch t {
		case v3.PolicyTypeIngress:
			ingress = true
		case v3.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func policyName(id PolicyID) string {
	if id.Namespace == "" {
		return id.Name
	}
	return id.Namespace + "/" + id.Name
}

// compareOrder sorts by order (nil last), then by name.
func compareOrder(ao, bo *float64, an, bn string) int {
	switch {
	case ao != nil && bo != nil:
		if r := cmp.Compare(*ao, *bo); r != 0 {
			return r
		}
	case ao != nil:
		return -1
	case bo != nil:
		return 1
	}
	return cmp.Compare(an, bn)
}

// comparePolicies is the evaluation order of placed policies: tier
// order, tier name, policy order, policy name (nil orders last).
func comparePolicies(a, b *parsedPolicy) int {
	if r := compareOrder(a.tier.order, b.tier.order, a.tier.name, b.tier.name); r != 0 {
		return r
	}
	return compareOrder(a.order, b.order, a.name, b.name)
}

// convertedProfile is a valid profile's rules, converted.
type convertedProfile struct {
	in, out      []Rule
	unrenderable []Unrenderable
	demands      map[string]*demand
}

// convertProfile converts a profile's rules (not scoped to a namespace;
// svc as for convertRules).
func convertProfile(p *v3.Profile, svc bool) *convertedProfile {
	demands := map[string]*demand{}
	in, badIn := convertRules(p.Spec.Ingress, "", ruleOwner{v3.KindProfile, "", p.Name, "ingress"}, svc, demands)
	out, badOut := convertRules(p.Spec.Egress, "", ruleOwner{v3.KindProfile, "", p.Name, "egress"}, svc, demands)
	return &convertedProfile{in: in, out: out, unrenderable: append(badIn, badOut...), demands: demands}
}

// published is the profile as the Result holds it.
func (c *convertedProfile) published(name string) *Profile {
	return &Profile{Name: name, Ingress: c.in, Egress: c.out}
}
