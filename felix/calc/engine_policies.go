package calc

import (
	"maps"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// policyState is one policy object in the Engine.
type policyState struct {
	key  objKey
	tier string // the tier it names
	// memo holds the policy's validation and parse while the object is
	// unchanged (a tier change re-derives it without parsing again).
	memo         *Memo
	p            *parsedPolicy // nil: skipped (invalid, missing tier)
	unrenderable []Unrenderable
	selected     map[objKey]*localState
	// refd is the policy whose sets are wanted (nil while inactive),
	// pol the published Policy.
	refd *parsedPolicy
	pol  *Policy
}

// profileState is one profile name in the Engine.
type profileState struct {
	conv *convertedProfile // nil: no valid profile of that name
	uses int               // local endpoints naming it
	refd *convertedProfile // whose sets are wanted and rules published
}

func (e *Engine) prof(name string) *profileState {
	pr := e.profs[name]
	if pr == nil {
		pr = &profileState{}
		e.profs[name] = pr
	}
	return pr
}

// updatePolicy re-derives one policy: its problems, its selection of
// local endpoints (evaluated only when its selector changed), the lists
// of the endpoints it selected or selects, and its sets.
func (e *Engine) updatePolicy(k objKey, o any) {
	ps := e.policies[k]
	if o == nil {
		if ps == nil {
			return
		}
		e.setProblems(k, nil)
		removeUser(e.tierUsers, ps.tier, k)
		if len(ps.unrenderable) > 0 {
			e.delta.unrenderable = true
		}
		ps.p = nil
		for lk, l := range ps.selected {
			delete(l.pols, k)
			delete(ps.selected, lk)
			e.rebuild(l)
		}
		e.syncPolicy(ps)
		delete(e.policies, k)
		return
	}
	if ps == nil {
		ps = &policyState{key: k, memo: NewMemo(), selected: map[objKey]*localState{}}
		e.policies[k] = ps
	}
	c := e.scratch()
	c.memo = ps.memo
	ps.memo.begin()
	var tier string
	switch o := o.(type) {
	case *v3.NetworkPolicy:
		c.loadNetworkPolicy(o)
		tier = o.Spec.Tier
	case *v3.GlobalNetworkPolicy:
		c.loadGlobalNetworkPolicy(o)
		tier = o.Spec.Tier
	}
	ps.memo.end()
	if tier == "" {
		tier = v3.DefaultTierName
	}
	removeUser(e.tierUsers, ps.tier, k)
	ps.tier = tier
	addUser(e.tierUsers, tier, k)
	e.setProblems(k, problemList(c.problems))
	if len(ps.unrenderable) > 0 || len(c.unrenderable) > 0 {
		e.delta.unrenderable = true
	}
	ps.unrenderable = c.unrenderable

	oldP := ps.p
	ps.p = nil
	if len(c.policies) > 0 {
		ps.p = c.policies[0]
	}
	affected := maps.Clone(ps.selected)
	if ps.p == nil {
		clear(ps.selected)
	} else if oldP == nil || oldP.sel.id != ps.p.sel.id {
		clear(ps.selected)
		for lk, l := range e.locals {
			if ps.p.sel.matches(l.le.labels) {
				ps.selected[lk] = l
				affected[lk] = l
			}
		}
	}
	for lk, l := range affected {
		if _, ok := ps.selected[lk]; ok {
			l.pols[k] = ps
		} else {
			delete(l.pols, k)
		}
		e.rebuild(l)
	}
	e.syncPolicy(ps)
}

// syncPolicy wants the policy's sets and publishes it while it selects a
// local endpoint, and drops them when it does not.
func (e *Engine) syncPolicy(ps *policyState) {
	var want *parsedPolicy
	if ps.p != nil && len(ps.selected) > 0 {
		want = ps.p
	}
	if want == ps.refd {
		return
	}
	if want != nil {
		for _, id := range slices.Sorted(maps.Keys(want.demands)) {
			e.idx.ref(want.demands[id])
		}
	}
	if ps.refd != nil {
		for id := range ps.refd.demands {
			e.idx.deref(id)
		}
	}
	ps.refd = want
	if ps.pol != nil {
		delete(e.livePolicies, ps.pol.ID)
		e.delta.policy(ps.pol.ID)
		ps.pol = nil
	}
	if want != nil {
		ps.pol = &Policy{ID: want.id, Ingress: want.in, Egress: want.out}
		e.livePolicies[want.id] = ps.pol
		e.delta.policy(want.id)
	}
	e.delta.policiesMap = true
}

// updateProfile re-derives one profile: its validity, its rules, and,
// when its existence or labels changed, every item inheriting from it.
func (e *Engine) updateProfile(k objKey, o any) {
	name := k.name
	var valid *v3.Profile
	var problems []Problem
	if p, ok := o.(*v3.Profile); ok {
		if err := p.Validate().Err(); err != nil {
			c := e.scratch()
			c.report(v3.KindProfile, "", p.Name, "invalid, skipped: %v", err)
			problems = problemList(c.problems)
		} else {
			valid = p
		}
	}
	e.setProblems(k, problems)
	old := e.profiles[name]
	if old == valid {
		return
	}
	relabel := old == nil || valid == nil || !maps.Equal(old.Spec.LabelsToApply, valid.Spec.LabelsToApply)
	pr := e.prof(name)
	if valid == nil {
		delete(e.profiles, name)
		pr.conv = nil
	} else {
		e.profiles[name] = valid
		conv := convertProfile(valid)
		pr.conv = &conv
	}
	e.syncProfile(name)
	if relabel {
		for _, ik := range sortedKeys(e.profileUsers[name]) {
			e.updateItem(ik, e.objs[ik])
		}
	}
	if pr.uses == 0 && pr.conv == nil && pr.refd == nil {
		delete(e.profs, name)
	}
}

// syncProfile wants a profile's sets and publishes it while a local
// endpoint uses it.
func (e *Engine) syncProfile(name string) {
	pr := e.profs[name]
	var want *convertedProfile
	if pr.uses > 0 {
		want = pr.conv
	}
	if want == pr.refd {
		return
	}
	if want != nil {
		for _, id := range slices.Sorted(maps.Keys(want.demands)) {
			e.idx.ref(want.demands[id])
		}
		if len(want.unrenderable) > 0 {
			e.delta.unrenderable = true
		}
	}
	if pr.refd != nil {
		for id := range pr.refd.demands {
			e.idx.deref(id)
		}
		if len(pr.refd.unrenderable) > 0 {
			e.delta.unrenderable = true
		}
	}
	pr.refd = want
	delete(e.liveProfiles, name)
	if want != nil {
		e.liveProfiles[name] = &Profile{Name: name, Ingress: want.in, Egress: want.out}
	}
	e.delta.profile(name)
	e.delta.profilesMap = true
}
