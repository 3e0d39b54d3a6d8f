package rules

import (
	"maps"
	"slices"

	"github.com/tabbynet/tabby/felix/calc"
)

// endpoints renders the endpoint section. A caching renderer reuses the
// last one when handed the very same endpoint list (calc hands it out
// again while no endpoint's policies changed).
func (r *renderer) endpoints(eps []calc.Endpoint) *endpointSection {
	c := r.cache
	if c != nil && c.section != nil && len(eps) > 0 && len(c.section.eps) == len(eps) && &c.section.eps[0] == &eps[0] {
		return c.section
	}
	outer := r.usedSet
	r.usedSet = map[string]string{}
	if c != nil {
		c.epCur = make(map[any]cachedChain, len(c.epPrev))
	}
	b := r.newSectionBuilder(eps)
	for _, ep := range r.resolveHostInterfaces(eps) {
		switch {
		case ep.Kind == calc.Workload:
			b.workload(ep)
		case ep.Interface != "":
			b.host(ep)
		default:
			continue // an IP-only host endpoint matching no interface
		}
		for _, p := range ep.Profiles {
			b.profiles[p] = true
		}
	}
	sec := b.finish()
	sec.sets, r.usedSet = r.usedSet, outer
	if c != nil {
		c.epPrev, c.epCur = c.epCur, nil
		c.section = sec
	}
	return sec
}

// sectionBuilder collects the endpoint section: the endpoints' chains,
// the dispatch chains that lead to them, and the policies and profiles
// they use.
type sectionBuilder struct {
	r   *renderer
	sec *endpointSection
	// The workload dispatch rules, and the host endpoint dispatches of
	// the filter (normal and forward), raw and mangle tables.
	fromWl, toWl                             []Rule
	fromHost, toHost, fromHostFwd, toHostFwd *dispatch
	rawFrom, rawTo, mangleFrom, mangleTo     *dispatch
	policies, rawPolicies, manglePolicies    map[calc.PolicyID]policyDirs
	profiles, mangleProfiles                 map[string]bool
	// bodies are the shared workload chain bodies already added.
	bodies map[string]bool
}

func (r *renderer) newSectionBuilder(eps []calc.Endpoint) *sectionBuilder {
	wlIfaces := make([]string, 0, len(r.cfg.WorkloadIfacePrefixes))
	for _, p := range r.cfg.WorkloadIfacePrefixes {
		wlIfaces = append(wlIfaces, p+"+")
	}
	hostSkip := []string{"lo"}
	return &sectionBuilder{
		r:              r,
		sec:            &endpointSection{eps: eps},
		fromHost:       &dispatch{name: ChainFromHostEp, flag: "-i", skip: hostSkip},
		toHost:         &dispatch{name: ChainToHostEp, flag: "-o", skip: hostSkip},
		fromHostFwd:    &dispatch{name: ChainFromHostEpFwd, flag: "-i", skip: wlIfaces},
		toHostFwd:      &dispatch{name: ChainToHostEpFwd, flag: "-o", skip: wlIfaces},
		rawFrom:        &dispatch{name: ChainFromHostEp, flag: "-i"},
		rawTo:          &dispatch{name: ChainToHostEp, flag: "-o"},
		mangleFrom:     &dispatch{name: ChainFromHostEp, flag: "-i", skip: append(slices.Clone(wlIfaces), "lo")},
		mangleTo:       &dispatch{name: ChainToHostEp, flag: "-o", skip: append(slices.Clone(wlIfaces), "lo")},
		policies:       map[calc.PolicyID]policyDirs{},
		rawPolicies:    map[calc.PolicyID]policyDirs{},
		manglePolicies: map[calc.PolicyID]policyDirs{},
		profiles:       map[string]bool{},
		mangleProfiles: map[string]bool{},
		bodies:         map[string]bool{},
	}
}

// use records that the policies of the tier lists are used in dir.
func use(set map[calc.PolicyID]policyDirs, dir policyDirs, lists ...[]calc.TierPolicies) {
	for _, tiers := range lists {
		for _, t := range tiers {
			for _, id := range t.Policies {
				set[id] |= dir
			}
		}
	}
}

// workload adds a workload's chains: cali-tw-/cali-fw-<iface>, each one
// goto to the (shared) chain body of its policies and profiles.
func (b *sectionBuilder) workload(ep calc.Endpoint) {
	r, sec := b.r, b.sec
	tw := PrefixToWorkload + ep.Interface
	fw := PrefixFromWorkload + ep.Interface
	b.toWl = append(b.toWl, Rule{Match: "-o " + ep.Interface, Action: "-g " + tw})
	b.fromWl = append(b.fromWl, Rule{Match: "-i " + ep.Interface, Action: "-g " + fw})
	twBody := r.workloadBody(PrefixToWorkloadShared, ep.Ingress, ep.Profiles, PrefixPolicyIn, PrefixProfileIn)
	fwBody := r.workloadBody(PrefixFromWorkloadShared, ep.Egress, ep.Profiles, PrefixPolicyOut, PrefixProfileOut)
	sec.chains = append(sec.chains, r.gotoChain(tw, twBody.Name), r.gotoChain(fw, fwBody.Name))
	for _, body := range []Chain{twBody, fwBody} {
		if !b.bodies[body.Name] {
			b.bodies[body.Name] = true
			sec.chains = append(sec.chains, body)
		}
	}
	use(b.policies, dirIn, ep.Ingress)
	use(b.policies, dirOut, ep.Egress)
}

// host adds a host endpoint's chains (one interface, or "*": every
// interface without its own). Its ingress policy applies to packets from
// the interface to the host, its egress policy to packets from the host
// out of it, each after the failsafe ports; its applyOnForward policies
// to packets forwarded from or to it; its preDNAT policy in mangle, its
// untracked policy in raw.
func (b *sectionBuilder) host(ep calc.Endpoint) {
	r, sec := b.r, b.sec
	suffix := ep.Interface
	if suffix == "*" {
		suffix = AllInterfaces
	}
	fh, th := PrefixFromHostEp+suffix, PrefixToHostEp+suffix
	fhfw, thfw := PrefixFromHostEpFwd+suffix, PrefixToHostEpFwd+suffix
	b.fromHost.add(ep.Interface, fh)
	b.toHost.add(ep.Interface, th)
	b.fromHostFwd.add(ep.Interface, fhfw)
	b.toHostFwd.add(ep.Interface, thfw)
	sec.chains = append(sec.chains,
		r.cachedEndpointChain(fh, ChainFailsafeIn, chainNormal, ep.Ingress, ep.Profiles, PrefixPolicyIn, PrefixProfileIn),
		r.cachedEndpointChain(th, ChainFailsafeOut, chainNormal, ep.Egress, ep.Profiles, PrefixPolicyOut, PrefixProfileOut),
		r.cachedEndpointChain(fhfw, "", chainForward, ep.ForwardIngress, nil, PrefixPolicyIn, PrefixProfileIn),
		r.cachedEndpointChain(thfw, "", chainForward, ep.ForwardEgress, nil, PrefixPolicyOut, PrefixProfileOut))
	use(b.policies, dirIn, ep.Ingress, ep.ForwardIngress)
	use(b.policies, dirOut, ep.Egress, ep.ForwardEgress)
	b.hostMangle(ep, fh, th)
	if ep.Interface != "*" && len(ep.UntrackedIngress)+len(ep.UntrackedEgress) > 0 {
		b.rawFrom.add(ep.Interface, fh)
		b.rawTo.add(ep.Interface, th)
		sec.rawChains = append(sec.rawChains,
			r.cachedEndpointChain(fh, ChainFailsafeIn, chainUntracked, ep.UntrackedIngress, nil, PrefixPolicyIn, PrefixProfileIn),
			r.cachedEndpointChain(th, ChainFailsafeOut, chainUntracked, ep.UntrackedEgress, nil, PrefixPolicyOut, PrefixProfileOut))
		use(b.rawPolicies, dirIn, ep.UntrackedIngress)
		use(b.rawPolicies, dirOut, ep.UntrackedEgress)
	}
}

// hostMangle adds a host endpoint's mangle chains: mangle POSTROUTING
// applies its egress policy to DNAT'd host-originated packets, mangle
// PREROUTING its preDNAT policy.
func (b *sectionBuilder) hostMangle(ep calc.Endpoint, fh, th string) {
	r, sec := b.r, b.sec
	b.mangleTo.add(ep.Interface, th)
	sec.mangleChains = append(sec.mangleChains,
		r.cachedEndpointChain(th, ChainFailsafeOut, chainMangleEgress, ep.Egress, ep.Profiles, PrefixPolicyOut, PrefixProfileOut))
	use(b.manglePolicies, dirOut, ep.Egress)
	for _, p := range ep.Profiles {
		b.mangleProfiles[p] = true
	}
	if len(ep.PreDNATIngress) > 0 {
		b.mangleFrom.add(ep.Interface, fh)
		sec.mangleChains = append(sec.mangleChains,
			r.cachedEndpointChain(fh, ChainFailsafeIn, chainPreDNAT, ep.PreDNATIngress, nil, PrefixPolicyIn, PrefixProfileIn))
		use(b.manglePolicies, dirIn, ep.PreDNATIngress)
	}
}

// finish adds the dispatch chains and returns the section.
func (b *sectionBuilder) finish() *endpointSection {
	sec := b.sec
	unknown := Rule{Action: "-j DROP", Comment: "Unknown interface"}
	sec.chains = append(sec.chains,
		Chain{Name: ChainFromWlDispatch, Rules: append(b.fromWl, unknown)},
		Chain{Name: ChainToWlDispatch, Rules: append(b.toWl, unknown)},
		b.fromHost.chain(), b.toHost.chain(), b.fromHostFwd.chain(), b.toHostFwd.chain())
	sec.rawChains = append(sec.rawChains, b.rawFrom.chain(), b.rawTo.chain())
	sec.mangleChains = append(sec.mangleChains, b.mangleFrom.chain(), b.mangleTo.chain())
	sec.policies, sec.rawPolicies, sec.manglePolicies = b.policies, b.rawPolicies, b.manglePolicies
	sec.profiles = slices.Collect(maps.Keys(b.profiles))
	sec.mangleProfiles = slices.Collect(maps.Keys(b.mangleProfiles))
	return sec
}
