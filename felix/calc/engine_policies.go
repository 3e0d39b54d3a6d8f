package calc

import (
	"maps"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// policyState is one policy object in the Engine.
type policyState struct {
	key objKey
	// obj is the object last loaded and load its loading: a tier change
	// places the same object again without parsing it again.
	obj          any
	load         loadedPolicy
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
		removeUser(e.tierUsers, ps.load.tier, k)
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
		ps = &policyState{key: k, selected: map[objKey]*localState{}}
		e.policies[k] = ps
	}
	if ps.obj != o {
		removeUser(e.tierUsers, ps.load.tier, k)
		ps.obj, ps.load = o, loadPolicy(o, e.services)
		addUser(e.tierUsers, ps.load.tier, k)
	}
	p, problems, unrenderable := ps.load.place(e.tiers)
	e.setProblems(k, problemSet(problems))
	if len(ps.unrenderable) > 0 || len(unrenderable) > 0 {
		e.delta.unrenderable = true
	}
	ps.unrenderable = unrenderable

	oldP := ps.p
	ps.p = p
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
		if problems = loadProfile(p); problems == nil {
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
		pr.conv = convertProfile(valid, e.services)
	}
	e.syncProfile(name)
	if relabel {
		for _, ik := range sortedKeys(e.profileUsers[name]) {
			e.updateItem(ik, e.objs[ik])
		}
	}
	e.dropIdleProfile(name)
}

// syncProfile wants a profile's sets and publishes it while a local
// endpoint uses it.
func (e *Engine) syncProfile(name string) {
	defer e.dropIdleProfile(name)
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
		e.liveProfiles[name] = want.published(name)
	}
	e.delta.profile(name)
	e.delta.profilesMap = true
}

// dropIdleProfile forgets the state of a profile name that no local
// endpoint uses and no valid profile has: it holds nothing a new state
// would not (without this, every profile name ever named by a local
// endpoint would stay).
func (e *Engine) dropIdleProfile(name string) {
	if pr := e.profs[name]; pr != nil && pr.uses == 0 && pr.conv == nil && pr.refd == nil {
		delete(e.profs, name)
	}
}
