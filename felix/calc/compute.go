package calc

import (
	"cmp"
	"maps"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Compute is the whole calculation from scratch: plain, deterministic
// (the same resources in any order give an identical Result) and the
// reference the Engine is tested against. felix runs the Engine; Compute
// loads every object through the same per-object loaders (load.go,
// policy.go) and derives the rest directly: every policy against every
// local endpoint, every set's selector against every item.
func Compute(in Input) *Result {
	c := &computer{
		env:      itemEnv{node: in.Node, profiles: map[string]*v3.Profile{}},
		tiers:    builtInTiers(),
		problems: map[Problem]bool{},
		demands:  map[string]*demand{},
		services: in.FollowsServices,
		slices:   map[string][]*v3.KubernetesEndpointSlice{},
	}
	objs := c.latest(in)
	c.loadProfilesAndTiers(objs)
	for _, o := range objs {
		c.loadItem(o)
		c.loadPolicy(o)
		if s, ok := o.(*v3.KubernetesEndpointSlice); ok {
			c.slices[s.Service()] = append(c.slices[s.Service()], s)
		}
	}
	res := &Result{Policies: map[PolicyID]*Policy{}, Profiles: map[string]*Profile{}, IPSets: map[string]*IPSet{}}
	c.selectPolicies(res)
	c.resolveProfiles(res)
	c.resolveSets(res)
	res.Problems = slices.SortedFunc(maps.Keys(c.problems), compareProblems)
	res.Unrenderable = c.unrenderable
	slices.SortFunc(res.Unrenderable, compareUnrenderable)
	return res
}

// computer is one Compute's state.
type computer struct {
	env          itemEnv
	tiers        map[string]*tierInfo
	problems     map[Problem]bool
	members      []labelled
	locals       []localEndpoint
	policies     []*parsedPolicy
	demands      map[string]*demand
	unrenderable []Unrenderable
	services     bool // Input.FollowsServices
	// slices are the EndpointSlices by service ("<namespace>/<name>").
	slices map[string][]*v3.KubernetesEndpointSlice
}

func (c *computer) report(ps []Problem) {
	for _, p := range ps {
		c.problems[p] = true
	}
}

// latest returns the input's objects by key, the greatest resourceVersion
// (string order) winning where a key is listed more than once (reported),
// so that input order never matters; objects of the same key and
// resourceVersion are the same stored object. The objects come in key
// order.
func (c *computer) latest(in Input) []any {
	byKey := map[objKey]any{}
	for _, o := range in.objects() {
		k, _ := keyOf(o)
		old, dup := byKey[k]
		if !dup {
			byKey[k] = o
			continue
		}
		c.report([]Problem{newProblem(k.kind, k.ns, k.name, "listed more than once; using the greatest resourceVersion")})
		if resourceVersion(o) > resourceVersion(old) {
			byKey[k] = o
		}
	}
	keys := slices.SortedFunc(maps.Keys(byKey), compareObjKeys)
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

// resourceVersion is the resourceVersion of any object the calculation
// takes.
func resourceVersion(o any) string {
	return o.(interface{ GetResourceVersion() string }).GetResourceVersion()
}

// loadProfilesAndTiers keeps the valid profiles and the effective tiers:
// what every other object's loading reads.
func (c *computer) loadProfilesAndTiers(objs []any) {
	for _, o := range objs {
		switch o := o.(type) {
		case *v3.Profile:
			if ps := loadProfile(o); ps != nil {
				c.report(ps)
			} else {
				c.env.profiles[o.Name] = o
			}
		case *v3.Tier:
			ti, ps := loadTier(o)
			c.report(ps)
			if ti != nil {
				c.tiers[o.Name] = ti
			}
		}
	}
}

// loadItem adds o, when it is an endpoint or network set, to the
// members and (a local endpoint) to the locals.
func (c *computer) loadItem(o any) {
	l := c.env.loadItem(o)
	c.report(l.problems)
	if l.member != nil {
		c.members = append(c.members, *l.member)
	}
	if l.local != nil {
		c.locals = append(c.locals, *l.local)
	}
}

// loadPolicy adds o, when it is a policy in effect, to the policies.
func (c *computer) loadPolicy(o any) {
	switch o.(type) {
	case *v3.NetworkPolicy, *v3.GlobalNetworkPolicy, *StagedPolicy:
	default:
		return
	}
	l := loadPolicy(o, c.services)
	p, problems, unrenderable := l.place(c.tiers)
	c.report(problems)
	c.unrenderable = append(c.unrenderable, unrenderable...)
	if p != nil {
		c.policies = append(c.policies, p)
	}
}

// selectPolicies builds each local endpoint's tier lists from the
// policies selecting it, in evaluation order, and publishes every policy
// that selects at least one (with the sets its rules need).
func (c *computer) selectPolicies(res *Result) {
	slices.SortFunc(c.locals, func(a, b localEndpoint) int { return compareEndpointRefs(a.ep.ref(), b.ep.ref()) })
	slices.SortFunc(c.policies, comparePolicies)
	res.Endpoints = make([]Endpoint, len(c.locals))
	for i := range c.locals {
		res.Endpoints[i] = c.locals[i].ep
	}
	for _, p := range c.policies {
		active := false
		for i := range c.locals {
			if p.sel.matches(c.locals[i].labels) {
				addToEndpoint(&res.Endpoints[i], p)
				active = true
			}
		}
		if active {
			res.Policies[p.id] = &Policy{ID: p.id, Ingress: p.in, Egress: p.out}
			maps.Copy(c.demands, p.demands)
		}
	}
}

// resolveProfiles publishes the profiles the local endpoints use (with
// the sets their rules need).
func (c *computer) resolveProfiles(res *Result) {
	for _, le := range c.locals {
		for _, name := range le.ep.Profiles {
			if _, done := res.Profiles[name]; done {
				continue
			}
			conv := convertProfile(c.env.profiles[name], c.services)
			maps.Copy(c.demands, conv.demands)
			c.unrenderable = append(c.unrenderable, conv.unrenderable...)
			res.Profiles[name] = conv.published(name)
		}
	}
}

// resolveSets computes the members of every set the published policies
// and profiles need, evaluating each selector once over all items.
func (c *computer) resolveSets(res *Result) {
	matches := map[string][]bool{}
	for id, d := range c.demands {
		var m []bool
		if d.sel != nil {
			var ok bool
			if m, ok = matches[d.sel.id]; !ok {
				m = make([]bool, len(c.members))
				for i := range c.members {
					m[i] = d.sel.matches(c.members[i].labels)
				}
				matches[d.sel.id] = m
			}
		}
		res.IPSets[id] = d.members(c.members, m, c.slices[d.service])
	}
}

// The orders of the Result's lists, shared by Compute and the Engine.

func compareProblems(a, b Problem) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name), cmp.Compare(a.Reason, b.Reason))
}

func compareUnrenderable(a, b Unrenderable) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name), cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Rule, b.Rule),
		cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Detail, b.Detail))
}

// compareEndpointRefs is the order of Result.Endpoints (and
// Delta.Endpoints): by kind, then key.
func compareEndpointRefs(a, b EndpointRef) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key))
}

// ref names the endpoint.
func (ep *Endpoint) ref() EndpointRef { return EndpointRef{Kind: ep.Kind, Key: ep.Key} }

func compareObjKeys(a, b objKey) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.ns, b.ns), cmp.Compare(a.name, b.name))
}

// appendTier appends p to the tier lists tiers (of one direction), in a
// new entry when p's tier is not the last one's.
func appendTier(tiers []TierPolicies, p *parsedPolicy) []TierPolicies {
	if n := len(tiers); n > 0 && tiers[n-1].Tier == p.tier.name {
		tiers[n-1].Policies = append(tiers[n-1].Policies, p.id)
		return tiers
	}
	return append(tiers, TierPolicies{Tier: p.tier.name, DefaultAction: p.tier.action, Policies: []PolicyID{p.id}})
}
