package calc

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// labelled is anything ipset membership is computed over: an endpoint
// (workload or host, local or remote) or a network set.
type labelled struct {
	key    memberKey
	labels map[string]string
	// shared is the Engine's interned copy of labels (nil in Compute):
	// it remembers which selectors match those labels.
	shared *sharedLabels
	nets   []netip.Prefix
	// netStrs are nets as ipset members, formatted once per object.
	netStrs []string
	ports   []namedPort
}

func prefixStrings(nets []netip.Prefix) []string {
	out := make([]string, len(nets))
	for i, n := range nets {
		out[i] = n.String()
	}
	return out
}

type namedPort struct {
	name  string
	proto uint8
	port  uint16
}

type tierInfo struct {
	name   string
	order  *float64
	action v3.Action
}

// parsedPolicy is a valid policy whose tier exists, before its rules are
// resolved (rules are resolved only for active policies).
type parsedPolicy struct {
	id              PolicyID
	name            string // policyName(id), for sorting
	order           *float64
	tier            *tierInfo
	sel             *matcher
	ingress, egress bool
	// kind is how the policy applies to host endpoints (normal,
	// applyOnForward, preDNAT, doNotTrack).
	kind policyKind
	// The policy's rules, converted once, and the ipsets they need.
	in, out []Rule
	demands map[string]*demand
}

type localEndpoint struct {
	ep     Endpoint
	key    memberKey
	labels map[string]string
}

type computer struct {
	node string
	// noKeys: the Engine's scratch computer (no memo keys, see memberKey).
	noKeys   bool
	problems map[Problem]bool
	profiles map[string]*v3.Profile
	tiers    map[string]*tierInfo
	members  []labelled
	locals   []localEndpoint
	policies []*parsedPolicy
	demands  map[string]*demand
	memo     *Memo
	// unrenderable collects the rules enforced in a fail-closed form.
	unrenderable []Unrenderable
	// sortedWEPs is the deduplicated, sorted workload endpoint list when
	// already known (the endpoint stage patches last time's);
	// wepDuplicates says whether deduplication dropped any.
	sortedWEPs    []*v3.WorkloadEndpoint
	wepDuplicates bool
	// wepsPrev, when set, holds each workload endpoint's contribution
	// from last time (valid for the same node and profiles); wepsNext,
	// when set, collects this time's.
	wepsPrev, wepsNext map[*v3.WorkloadEndpoint]*wepOut
}

// Compute is the whole calculation. It is deterministic: the same resources
// in any order give an identical Result.
func Compute(in Input) *Result { return ComputeWith(in, nil) }

// ComputeWith is Compute reusing the per-object work (validation, parsing,
// rule conversion) remembered in memo from earlier calls, so that a
// recomputation after a small change skips the unchanged objects' work.
// Objects are recognised by pointer: the caller must not modify an object
// it has passed in (replace it instead, as a datastore cache does). The
// Result may share rule slices with memo; treat it as read-only. A nil
// memo is allowed. The result is identical with or without a memo.
func ComputeWith(in Input, memo *Memo) *Result {
	c := &computer{
		node:     in.Node,
		problems: map[Problem]bool{},
		profiles: map[string]*v3.Profile{},
		tiers:    map[string]*tierInfo{},
		demands:  map[string]*demand{},
		memo:     memo,
	}
	setsHint := 0 // about last time's number of sets, to presize maps
	if memo != nil {
		memo.begin()
		defer memo.end()
		setsHint = len(memo.ipsets)
		c.demands = make(map[string]*demand, setsHint)
	}
	c.loadProfiles(in.Profiles)
	c.loadTiers(in.Tiers)
	c.loadEndpointsStaged(in.WorkloadEndpoints, in.HostEndpoints)
	c.loadNetworkSets(in.NetworkSets, in.GlobalNetworkSets)
	c.loadPolicies(in.NetworkPolicies, in.GlobalNetworkPolicies)

	res := &Result{
		Policies: make(map[PolicyID]*Policy, len(c.policies)),
		Profiles: map[string]*Profile{},
		IPSets:   make(map[string]*IPSet, setsHint),
	}
	var oldLocals, oldMembers *matchCache
	if memo != nil {
		oldLocals, oldMembers = memo.locals, memo.members
	}
	locals := c.localMatchSet(oldLocals)
	c.selectPolicies(res, locals)
	c.resolveProfiles(res)
	members := c.memberMatchSet(oldMembers)
	// A set (its ID names its definition) is rebuilt only when its
	// selector matches a labelled object that came or went: the objects
	// in both lists are unchanged. A CIDR set depends on no object.
	for id, d := range c.demands {
		if memo != nil {
			if set, ok := memo.ipsets[id]; ok && (d.sel == nil || !members.mayDiffer(d.sel)) {
				res.IPSets[id] = set
				continue
			}
		}
		var matches []bool
		if d.sel != nil {
			matches = members.eval(d.sel)
		}
		res.IPSets[id] = d.members(c.members, matches)
	}
	if memo != nil {
		memo.ipsets = res.IPSets
	}
	if memo != nil {
		memo.locals, memo.members = locals.done(), members.done()
	}
	for p := range c.problems {
		res.Problems = append(res.Problems, p)
	}
	slices.SortFunc(res.Problems, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.Reason, b.Reason))
	})
	res.Unrenderable = c.unrenderable
	slices.SortFunc(res.Unrenderable, func(a, b Unrenderable) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Detail, b.Detail))
	})
	return res
}

func (c *computer) report(kind, ns, name, format string, args ...any) {
	c.problems[Problem{Kind: kind, Namespace: ns, Name: name, Reason: fmt.Sprintf(format, args...)}] = true
}

// dedupe sorts objects by key and drops duplicates (reported), keeping the
// one with the greatest resourceVersion, so that input order never matters.
// Ties (same key and resourceVersion) are the same stored object, so an
// unstable sort is deterministic enough.
func dedupe[T any](c *computer, kind string, objs []T, key func(T) (ns, name, rv string)) []T {
	type keyed struct {
		ns, name, rv string
		obj          T
	}
	ks := make([]keyed, len(objs))
	for i, o := range objs {
		ks[i].ns, ks[i].name, ks[i].rv = key(o)
		ks[i].obj = o
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		return cmp.Or(strings.Compare(a.ns, b.ns), strings.Compare(a.name, b.name), strings.Compare(b.rv, a.rv))
	})
	out := make([]T, 0, len(ks))
	for i := range ks {
		if i > 0 && ks[i].ns == ks[i-1].ns && ks[i].name == ks[i-1].name {
			c.report(kind, ks[i].ns, ks[i].name, "listed more than once; using the greatest resourceVersion")
			continue
		}
		out = append(out, ks[i].obj)
	}
	return out
}

func (c *computer) loadProfiles(profs []*v3.Profile) {
	for _, p := range dedupe(c, v3.KindProfile, profs, func(p *v3.Profile) (string, string, string) { return "", p.Name, p.ResourceVersion }) {
		if err := memoGet(c.memo, validationKey{p}, func() error { return p.Validate().Err() }); err != nil {
			c.report(v3.KindProfile, "", p.Name, "invalid, skipped: %v", err)
			continue
		}
		c.profiles[p.Name] = p
	}
}

func (c *computer) loadTiers(tiers []*v3.Tier) {
	for _, t := range v3.DefaultTiers() {
		c.tiers[t.Name] = &tierInfo{name: t.Name, order: t.Spec.Order, action: *t.Spec.DefaultAction}
	}
	for _, t := range dedupe(c, v3.KindTier, tiers, func(t *v3.Tier) (string, string, string) { return "", t.Name, t.ResourceVersion }) {
		if err := t.Validate().Err(); err != nil {
			c.report(v3.KindTier, "", t.Name, "invalid, skipped: %v", err)
			continue
		}
		ti := &tierInfo{name: t.Name, order: t.Spec.Order, action: v3.Deny}
		if t.Spec.DefaultAction != nil {
			ti.action = *t.Spec.DefaultAction
		}
		c.tiers[t.Name] = ti
	}
}

// existingProfiles returns the named profiles that exist, reporting the
// others for kind (when not empty).
func (c *computer) existingProfiles(kind, ns, name string, profiles []string) []string {
	var found []string
	for _, pn := range profiles {
		if _, ok := c.profiles[pn]; ok {
			found = append(found, pn)
		} else if kind != "" {
			c.report(kind, ns, name, "profile %q does not exist; ignored", pn)
		}
	}
	return found
}

// inheritLabels builds an endpoint's effective labels: its profiles'
// labelsToApply (earlier profiles win), then its own labels, then the
// implicit namespace labels. It returns the profiles that exist.
func (c *computer) inheritLabels(kind, ns, name string, own map[string]string, profiles []string) (map[string]string, []string) {
	labels := map[string]string{}
	var found []string
	for i := len(profiles) - 1; i >= 0; i-- {
		p, ok := c.profiles[profiles[i]]
		if !ok {
			continue
		}
		maps.Copy(labels, p.Spec.LabelsToApply)
	}
	for _, pn := range profiles {
		if _, ok := c.profiles[pn]; ok {
			found = append(found, pn)
		} else if kind != "" {
			c.report(kind, ns, name, "profile %q does not exist; ignored", pn)
		}
	}
	maps.Copy(labels, own)
	if ns != "" {
		labels[selector.NamespaceLabel] = ns
		if _, ok := labels[nsLabelPrefix+nameLabel]; !ok {
			labels[nsLabelPrefix+nameLabel] = ns
		}
	}
	return labels, found
}

func parseNets(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		var p netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(s)
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP or CIDR", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// wepOut is what one workload endpoint contributes to a computation; it
// depends only on the endpoint, the node and the profiles.
type wepOut struct {
	problems []Problem
	member   *labelled // nil when skipped
	local    *localEndpoint
}

func (c *computer) loadWEP(w *v3.WorkloadEndpoint) *wepOut {
	out := &wepOut{}
	problem := func(reason string) {
		out.problems = append(out.problems, Problem{Kind: v3.KindWorkloadEndpoint, Namespace: w.Namespace, Name: w.Name, Reason: reason})
	}
	local := w.Spec.Node == c.node
	info := memoGet(c.memo, wepKey{w, local}, func() wepInfo {
		// A local endpoint's fields end up in rules (interface name),
		// so it must be fully valid; of a remote one only the labels,
		// IPs and ports are used, and those are checked where used.
		if local {
			if err := w.Validate().Err(); err != nil {
				return wepInfo{problem: fmt.Sprintf("invalid, skipped: %v", err)}
			}
		}
		nets, err := parseNets(w.Spec.IPNetworks)
		if err != nil {
			return wepInfo{problem: fmt.Sprintf("skipped: %v", err)}
		}
		return wepInfo{nets: nets}
	})
	if info.problem != "" {
		problem(info.problem)
		return out
	}
	nets := info.nets
	profs := c.existingProfiles("", w.Namespace, w.Name, w.Spec.Profiles)
	if local { // missing profiles are reported for local endpoints only
		for _, pn := range w.Spec.Profiles {
			if _, ok := c.profiles[pn]; !ok {
				problem(fmt.Sprintf("profile %q does not exist; ignored", pn))
			}
		}
	}
	key := c.memberKey(w, w.Spec.Profiles)
	// The labels depend only on the endpoint and its profiles: the key.
	m := memoGet(c.memo, labelsKey{key}, func() labelled {
		labels, _ := c.inheritLabels("", w.Namespace, w.Name, w.Labels, w.Spec.Profiles)
		if _, ok := labels[saLabelPrefix+nameLabel]; !ok && w.Spec.ServiceAccountName != "" {
			labels[saLabelPrefix+nameLabel] = w.Spec.ServiceAccountName
		}
		m := labelled{key: key, labels: labels, nets: nets, netStrs: prefixStrings(nets)}
		for _, p := range w.Spec.Ports {
			if p.Protocol.SupportsPorts() && p.Port != 0 {
				m.ports = append(m.ports, namedPort{name: p.Name, proto: p.Protocol.Number(), port: p.Port})
			}
		}
		return m
	})
	out.member = &m
	if local {
		out.local = &localEndpoint{key: key, labels: m.labels, ep: Endpoint{
			Kind: Workload, Key: w.Namespace + "/" + w.Name, Interface: w.Spec.InterfaceName,
			Addrs: nets, Profiles: profs,
		}}
	}
	return out
}

func (c *computer) loadEndpoints(weps []*v3.WorkloadEndpoint, heps []*v3.HostEndpoint) {
	sorted := c.sortedWEPs
	if sorted == nil {
		sorted = dedupe(c, v3.KindWorkloadEndpoint, weps, func(w *v3.WorkloadEndpoint) (string, string, string) {
			return w.Namespace, w.Name, w.ResourceVersion
		})
		c.sortedWEPs = sorted
		c.wepDuplicates = len(sorted) < len(weps)
	}
	for _, w := range sorted {
		var o *wepOut
		if c.wepsPrev != nil {
			o = c.wepsPrev[w]
		}
		if o == nil {
			o = c.loadWEP(w)
		}
		if c.wepsNext != nil {
			c.wepsNext[w] = o
		}
		for _, p := range o.problems {
			c.problems[p] = true
		}
		if o.member != nil {
			c.members = append(c.members, *o.member)
		}
		if o.local != nil {
			c.locals = append(c.locals, *o.local)
		}
	}
	for _, h := range dedupe(c, v3.KindHostEndpoint, heps, func(h *v3.HostEndpoint) (string, string, string) {
		return "", h.Name, h.ResourceVersion
	}) {
		c.loadHEP(h)
	}
	slices.SortFunc(c.locals, func(a, b localEndpoint) int {
		return cmp.Or(cmp.Compare(a.ep.Kind, b.ep.Kind), cmp.Compare(a.ep.Key, b.ep.Key))
	})
}

// loadHEP adds one host endpoint to the members (and the locals when it is
// on this node), or reports why it is skipped.
func (c *computer) loadHEP(h *v3.HostEndpoint) {
	if err := h.Validate().Err(); err != nil {
		c.report(v3.KindHostEndpoint, "", h.Name, "invalid, skipped: %v", err)
		return
	}
	nets, err := parseNets(h.Spec.ExpectedIPs)
	if err != nil {
		c.report(v3.KindHostEndpoint, "", h.Name, "skipped: %v", err)
		return
	}
	local := h.Spec.Node == c.node
	kind := ""
	if local {
		kind = v3.KindHostEndpoint
	}
	labels, profs := c.inheritLabels(kind, "", h.Name, h.Labels, h.Spec.Profiles)
	key := c.memberKey(h, h.Spec.Profiles)
	m := labelled{key: key, labels: labels, nets: nets, netStrs: prefixStrings(nets)}
	for _, p := range h.Spec.Ports {
		if p.Protocol.SupportsPorts() && p.Port != 0 {
			m.ports = append(m.ports, namedPort{name: p.Name, proto: p.Protocol.Number(), port: p.Port})
		}
	}
	c.members = append(c.members, m)
	if local {
		c.locals = append(c.locals, localEndpoint{key: key, labels: labels, ep: Endpoint{
			Kind: Host, Key: h.Name, Interface: h.Spec.InterfaceName, Addrs: nets, Profiles: profs,
		}})
	}
}

func (c *computer) loadNetworkSets(nsets []*v3.NetworkSet, gsets []*v3.GlobalNetworkSet) {
	for _, s := range dedupe(c, v3.KindNetworkSet, nsets, func(s *v3.NetworkSet) (string, string, string) {
		return s.Namespace, s.Name, s.ResourceVersion
	}) {
		c.loadNetworkSet(s)
	}
	for _, s := range dedupe(c, v3.KindGlobalNetworkSet, gsets, func(s *v3.GlobalNetworkSet) (string, string, string) {
		return "", s.Name, s.ResourceVersion
	}) {
		c.loadGlobalNetworkSet(s)
	}
}

// loadNetworkSet adds one NetworkSet to the members, or reports why not.
func (c *computer) loadNetworkSet(s *v3.NetworkSet) {
	if err := s.Validate().Err(); err != nil {
		c.report(v3.KindNetworkSet, s.Namespace, s.Name, "invalid, skipped: %v", err)
		return
	}
	nets, err := parseNets(s.Spec.Nets)
	if err != nil {
		c.report(v3.KindNetworkSet, s.Namespace, s.Name, "skipped: %v", err)
		return
	}
	labels, _ := c.inheritLabels("", s.Namespace, s.Name, s.Labels, []string{"kns." + s.Namespace})
	c.members = append(c.members, labelled{key: c.memberKey(s, []string{"kns." + s.Namespace}), labels: labels, nets: nets, netStrs: prefixStrings(nets)})
}

// loadGlobalNetworkSet adds one GlobalNetworkSet to the members, or
// reports why not.
func (c *computer) loadGlobalNetworkSet(s *v3.GlobalNetworkSet) {
	if err := s.Validate().Err(); err != nil {
		c.report(v3.KindGlobalNetworkSet, "", s.Name, "invalid, skipped: %v", err)
		return
	}
	nets, err := parseNets(s.Spec.Nets)
	if err != nil {
		c.report(v3.KindGlobalNetworkSet, "", s.Name, "skipped: %v", err)
		return
	}
	c.members = append(c.members, labelled{key: c.memberKey(s, nil), labels: maps.Clone(s.Labels), nets: nets, netStrs: prefixStrings(nets)})
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

func (c *computer) loadPolicies(nps []*v3.NetworkPolicy, gnps []*v3.GlobalNetworkPolicy) {
	for _, np := range dedupe(c, v3.KindNetworkPolicy, nps, func(p *v3.NetworkPolicy) (string, string, string) {
		return p.Namespace, p.Name, p.ResourceVersion
	}) {
		c.loadNetworkPolicy(np)
	}
	for _, gp := range dedupe(c, v3.KindGlobalNetworkPolicy, gnps, func(p *v3.GlobalNetworkPolicy) (string, string, string) {
		return "", p.Name, p.ResourceVersion
	}) {
		c.loadGlobalNetworkPolicy(gp)
	}
}

// loadNetworkPolicy adds one NetworkPolicy to the policies, or reports why
// not.
func (c *computer) loadNetworkPolicy(np *v3.NetworkPolicy) {
	if err := memoGet(c.memo, validationKey{np}, func() error { return np.Validate().Err() }); err != nil {
		c.report(v3.KindNetworkPolicy, np.Namespace, np.Name, "invalid, skipped: %v", err)
		return
	}
	s := &np.Spec
	c.addPolicy(np, v3.KindNetworkPolicy, np.Namespace, np.Name, s.Tier, policyNormal, s.Order, s.Selector, "", s.ServiceAccountSelector, s.Types, s.Ingress, s.Egress)
}

// loadGlobalNetworkPolicy adds one GlobalNetworkPolicy to the policies,
// or reports why not.
func (c *computer) loadGlobalNetworkPolicy(gp *v3.GlobalNetworkPolicy) {
	if err := memoGet(c.memo, validationKey{gp}, func() error { return gp.Validate().Err() }); err != nil {
		c.report(v3.KindGlobalNetworkPolicy, "", gp.Name, "invalid, skipped: %v", err)
		return
	}
	s := &gp.Spec
	c.addPolicy(gp, v3.KindGlobalNetworkPolicy, "", gp.Name, s.Tier, globalPolicyKind(s), s.Order, s.Selector, s.NamespaceSelector, s.ServiceAccountSelector, s.Types, s.Ingress, s.Egress)
}

// addPolicy resolves the tier (every time: tiers come and go) and uses the
// memoised parse of the policy itself.
func (c *computer) addPolicy(obj any, kind, ns, name, tier string, pk policyKind, order *float64, sel, nsSel, saSel string, types []v3.PolicyType, in, out []v3.Rule) {
	if tier == "" {
		tier = v3.DefaultTierName
	}
	ti, ok := c.tiers[tier]
	if !ok {
		c.report(kind, ns, name, "tier %q does not exist; policy skipped", tier)
		return
	}
	info := memoGet(c.memo, obj, func() policyInfo {
		return parsePolicy(kind, ns, name, sel, nsSel, saSel, types, in, out)
	})
	c.unrenderable = append(c.unrenderable, info.unrenderable...)
	p := *info.p
	p.id = PolicyID{Tier: tier, Namespace: ns, Name: name}
	p.name = policyName(p.id)
	p.order, p.tier, p.kind = order, ti, pk
	c.policies = append(c.policies, &p)
}

// parsePolicy parses a valid policy's selector and converts its rules
// (see convertRules for the rules that cannot be rendered). When the
// selector cannot be parsed (validation should have refused it), which
// endpoints the policy selects is unknown: it then selects every endpoint
// of its namespace scope (narrowed by the parts of the selector that do
// parse) and denies all their traffic in its directions.
func parsePolicy(kind, ns, name, sel, nsSel, saSel string, types []v3.PolicyType, in, out []v3.Rule) policyInfo {
	conv := &computer{demands: map[string]*demand{}}
	p := &parsedPolicy{demands: conv.demands}
	p.ingress, p.egress = policyTypes(types, in, out)
	m, err := newMatcher(sel, ns, nsSel, saSel, nil)
	if err != nil {
		p.sel = widestMatcher(sel, ns, nsSel, saSel)
		deny := []Rule{{Action: v3.Deny}}
		p.in, p.out = deny, deny
		return policyInfo{p: p, unrenderable: []Unrenderable{{Kind: kind, Namespace: ns, Name: name,
			Rule: -1, Handling: Denied, Reason: ReasonPolicySelector, Detail: err.Error()}}}
	}
	p.sel = m
	var badIn, badOut []Unrenderable
	p.in, badIn = conv.convertRules(in, ns, ruleOwner{kind, ns, name, "ingress"})
	p.out, badOut = conv.convertRules(out, ns, ruleOwner{kind, ns, name, "egress"})
	return policyInfo{p: p, unrenderable: append(badIn, badOut...)}
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

// orderLess sorts by order (nil last), then by name.
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

func policyName(id PolicyID) string {
	if id.Namespace == "" {
		return id.Name
	}
	return id.Namespace + "/" + id.Name
}

// selectPolicies finds, for each local endpoint, the policies that apply,
// groups them by tier in order, and resolves the rules of every active
// policy.
func (c *computer) localMatchSet(old *matchCache) *matchSet {
	keys := make([]memberKey, len(c.locals))
	labels := make([]map[string]string, len(c.locals))
	for i := range c.locals {
		keys[i], labels[i] = c.locals[i].key, c.locals[i].labels
	}
	return newMatchSet(keys, labels, old)
}

func (c *computer) memberMatchSet(old *matchCache) *matchSet {
	keys := make([]memberKey, len(c.members))
	labels := make([]map[string]string, len(c.members))
	for i := range c.members {
		keys[i], labels[i] = c.members[i].key, c.members[i].labels
	}
	return newMatchSet(keys, labels, old)
}

func (c *computer) selectPolicies(res *Result, locals *matchSet) {
	slices.SortFunc(c.policies, func(a, b *parsedPolicy) int {
		if r := compareOrder(a.tier.order, b.tier.order, a.tier.name, b.tier.name); r != 0 {
			return r
		}
		return compareOrder(a.order, b.order, a.name, b.name)
	})
	// The endpoints' tier lists depend only on the local endpoints and on
	// the ordered policies' identities, tiers, directions and selectors,
	// not on their rules: when those are as last time, reuse the lists.
	order := make([]selectionKey, len(c.policies))
	for i, p := range c.policies {
		order[i] = selectionKey{id: p.id, tier: p.tier.name, action: p.tier.action, ingress: p.ingress, egress: p.egress, kind: p.kind, sel: p.sel.id}
	}
	var last *selection
	if c.memo != nil {
		last = c.memo.selection
	}
	reuse := last != nil && locals.same && slices.Equal(last.order, order)
	var eps []Endpoint
	if reuse {
		eps = last.eps
	} else {
		eps = make([]Endpoint, len(c.locals))
		for li := range c.locals {
			eps[li] = c.locals[li].ep
		}
	}
	// Policies in order, each appended to the endpoints it selects: every
	// endpoint's lists come out in policy order, at the cost of the
	// selections rather than of endpoints x policies.
	for _, p := range c.policies {
		sel := locals.selected(p.sel)
		if len(sel) == 0 {
			continue
		}
		if !reuse {
			for _, li := range sel {
				addToEndpoint(&eps[li], p)
			}
		}
		res.Policies[p.id] = &Policy{ID: p.id, Ingress: p.in, Egress: p.out}
		maps.Copy(c.demands, p.demands)
	}
	res.Endpoints = eps
	if c.memo != nil {
		c.memo.selection = &selection{order: order, eps: eps}
	}
}

// selectionKey is what of one ordered policy the endpoints' tier lists
// depend on.
type selectionKey struct {
	id              PolicyID
	tier            string
	action          v3.Action
	ingress, egress bool
	kind            policyKind
	sel             string
}

// selection is the last computation's endpoint tier lists and the policy
// order they were built from.
type selection struct {
	order []selectionKey
	eps   []Endpoint
}

func appendTier(tiers []TierPolicies, p *parsedPolicy) []TierPolicies {
	if n := len(tiers); n > 0 && tiers[n-1].Tier == p.tier.name {
		tiers[n-1].Policies = append(tiers[n-1].Policies, p.id)
		return tiers
	}
	return append(tiers, TierPolicies{Tier: p.tier.name, DefaultAction: p.tier.action, Policies: []PolicyID{p.id}})
}

func (c *computer) resolveProfiles(res *Result) {
	for _, le := range c.locals {
		for _, name := range le.ep.Profiles {
			if _, done := res.Profiles[name]; done {
				continue
			}
			p := c.profiles[name]
			conv := memoGet(c.memo, profileRulesKey{p}, func() convertedProfile { return convertProfile(p) })
			maps.Copy(c.demands, conv.demands)
			c.unrenderable = append(c.unrenderable, conv.unrenderable...)
			res.Profiles[name] = &Profile{Name: name, Ingress: conv.in, Egress: conv.out}
		}
	}
}

// convertProfile converts a profile's rules (not scoped to a namespace).
func convertProfile(p *v3.Profile) convertedProfile {
	conv := &computer{demands: map[string]*demand{}}
	in, badIn := conv.convertRules(p.Spec.Ingress, "", ruleOwner{v3.KindProfile, "", p.Name, "ingress"})
	out, badOut := conv.convertRules(p.Spec.Egress, "", ruleOwner{v3.KindProfile, "", p.Name, "egress"})
	return convertedProfile{in: in, out: out, unrenderable: append(badIn, badOut...), demands: conv.demands}
}

// profileRulesKey names a profile's memoised rule conversion.
type profileRulesKey struct{ p *v3.Profile }

type convertedProfile struct {
	in, out      []Rule
	unrenderable []Unrenderable
	demands      map[string]*demand
}
