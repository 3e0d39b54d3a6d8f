package calc

import (
	"maps"
	"reflect"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Engine is the incremental calculation: resources go in one at a time
// (Upsert, Delete), and Flush returns the same Result a from-scratch
// Compute of the current resources would, plus a Delta of what changed
// since the last Flush. The work of an update is proportional to what it
// touches:
//
//   - an endpoint or network set (an "item") is evaluated against the
//     selectors of its namespace and the global ones only, and its ipset
//     members are added or removed where its matches changed
//     (labelindex.go);
//   - a local endpoint's policy lists are rebuilt when its labels,
//     profiles or the policies selecting it change;
//   - a policy is evaluated against the local endpoints only; its ipsets
//     are created (one pass over the items of their namespace scope)
//     when it becomes active and dropped when it no longer is;
//   - a profile change re-derives the items that inherit its labels; a
//     tier change re-derives the policies of that tier.
//
// Like Compute it is pure, deterministic and reads no clock. Objects are
// keyed by kind, namespace and name: an Upsert replaces the object of the
// same key (no duplicates can arise). Objects passed in must not be
// modified afterwards. Not safe for concurrent use.
type Engine struct {
	node string
	// services: rules' services matches are followed (FollowServices).
	services bool

	objs     map[objKey]any
	kinds    map[string]int         // how many of objs are of each kind
	tiers    map[string]*tierInfo   // effective tiers: built-in, overridden by valid Tier objects
	profiles map[string]*v3.Profile // valid profiles
	problems map[objKey][]Problem

	idx       labelIndex
	labelSets labelSets

	// profileUsers: for each profile name, the items (endpoints,
	// network sets) whose labels inherit from it, whether it exists or
	// not.
	profileUsers map[string]map[objKey]bool
	itemProfiles map[objKey][]string
	// tierUsers: for each tier name, the policies naming it.
	tierUsers map[string]map[objKey]bool

	locals   map[objKey]*localState
	sorted   []*localState // by kind, key
	policies map[objKey]*policyState
	profs    map[string]*profileState

	// Published parts of the Result, replaced (never modified) when
	// they change.
	livePolicies map[PolicyID]*Policy
	liveProfiles map[string]*Profile
	res          Result
	delta        deltaBuilder
}

// objKey names one resource.
type objKey struct{ kind, ns, name string }

func keyOf(o any) (objKey, bool) {
	switch o := o.(type) {
	case *v3.WorkloadEndpoint:
		return objKey{v3.KindWorkloadEndpoint, o.Namespace, o.Name}, true
	case *v3.HostEndpoint:
		return objKey{v3.KindHostEndpoint, "", o.Name}, true
	case *v3.NetworkPolicy:
		return objKey{v3.KindNetworkPolicy, o.Namespace, o.Name}, true
	case *v3.GlobalNetworkPolicy:
		return objKey{v3.KindGlobalNetworkPolicy, "", o.Name}, true
	case *v3.Tier:
		return objKey{v3.KindTier, "", o.Name}, true
	case *v3.Profile:
		return objKey{v3.KindProfile, "", o.Name}, true
	case *v3.NetworkSet:
		return objKey{v3.KindNetworkSet, o.Namespace, o.Name}, true
	case *v3.GlobalNetworkSet:
		return objKey{v3.KindGlobalNetworkSet, "", o.Name}, true
	case *v3.KubernetesEndpointSlice:
		return objKey{v3.KindKubernetesEndpointSlice, o.Namespace, o.Name}, true
	case *StagedPolicy:
		return objKey{o.Kind, o.Namespace(), o.Name()}, true
	}
	return objKey{}, false
}

// NewEngine returns an empty engine for the node named node.
func NewEngine(node string) *Engine {
	e := &Engine{
		node:         node,
		objs:         map[objKey]any{},
		kinds:        map[string]int{},
		tiers:        builtInTiers(),
		profiles:     map[string]*v3.Profile{},
		problems:     map[objKey][]Problem{},
		profileUsers: map[string]map[objKey]bool{},
		itemProfiles: map[objKey][]string{},
		tierUsers:    map[string]map[objKey]bool{},
		locals:       map[objKey]*localState{},
		policies:     map[objKey]*policyState{},
		profs:        map[string]*profileState{},
		livePolicies: map[PolicyID]*Policy{},
		liveProfiles: map[string]*Profile{},
	}
	e.idx.init(&e.delta)
	e.res = Result{Endpoints: []Endpoint{}, Policies: map[PolicyID]*Policy{}, Profiles: map[string]*Profile{}, IPSets: map[string]*IPSet{}}
	e.delta.reset()
	return e
}

// FollowServices makes rules' services matches select their Services'
// endpoints from the EndpointSlices upserted (Input.FollowsServices). Call
// it before the first Upsert.
func (e *Engine) FollowServices() {
	if len(e.objs) > 0 {
		panic("calc: FollowServices after the first Upsert")
	}
	e.services = true
}

// Upsert adds or replaces one resource. It reports false for kinds the
// calculation does not take.
func (e *Engine) Upsert(o any) bool {
	k, ok := keyOf(o)
	if _, staged := o.(*StagedPolicy); !ok || staged { // felix enforces no staged policy

		return false
	}
	old, had := e.objs[k]
	if !had {
		e.kinds[k.kind]++
	}
	// The object is loaded whole; what is kept of another node's
	// endpoint is only what a later re-derivation reads.
	e.objs[k] = o
	e.update(k)
	if w, ok := o.(*v3.WorkloadEndpoint); ok && w.Spec.Node != e.node {
		e.objs[k] = e.compactRemote(w)
	}
	e.forget(old)
	return true
}

// forget releases what the Engine shared on behalf of o, an object no
// longer held.
func (e *Engine) forget(o any) {
	if r, ok := o.(*remoteWEP); ok {
		e.labelSets.release(r.labels)
	}
}

// Reserve prepares for n more resources of kind (a snapshot about to be
// loaded): the maps every one of them enters are made that large at
// once instead of growing (and rehashing their keys) again and again.
// Results do not depend on it.
func (e *Engine) Reserve(kind string, n int) {
	if n <= 0 {
		return
	}
	e.objs = grown(e.objs, n)
	switch kind {
	case v3.KindWorkloadEndpoint, v3.KindHostEndpoint, v3.KindNetworkSet, v3.KindGlobalNetworkSet:
		e.idx.items = grown(e.idx.items, n)
		e.itemProfiles = grown(e.itemProfiles, n)
	}
}

// grown is m with room for n more keys.
func grown[K comparable, V any](m map[K]V, n int) map[K]V {
	out := make(map[K]V, len(m)+n)
	maps.Copy(out, m)
	return out
}

// Count is the number of resources of kind held.
func (e *Engine) Count(kind string) int { return e.kinds[kind] }

// Delete removes the resource with o's kind, namespace and name (o may be
// the last version seen or any object with the same key). It reports
// false for kinds the calculation does not take.
func (e *Engine) Delete(o any) bool {
	k, ok := keyOf(o)
	if !ok {
		return false
	}
	old, had := e.objs[k]
	if !had {
		return true
	}
	delete(e.objs, k)
	e.kinds[k.kind]--
	e.update(k)
	e.forget(old)
	return true
}

// DeleteKey removes the resource of the given kind, namespace and name
// (as Delete, for a caller that knows the key but not the object). It
// reports false for kinds the calculation does not take.
func (e *Engine) DeleteKey(kind, namespace, name string) bool {
	switch kind {
	case v3.KindHostEndpoint, v3.KindGlobalNetworkPolicy, v3.KindTier, v3.KindProfile, v3.KindGlobalNetworkSet:
		namespace = ""
	case v3.KindWorkloadEndpoint, v3.KindNetworkPolicy, v3.KindNetworkSet, v3.KindKubernetesEndpointSlice:
	default:
		return false
	}
	k := objKey{kind, namespace, name}
	if old, had := e.objs[k]; had {
		delete(e.objs, k)
		e.kinds[k.kind]--
		e.update(k)
		e.forget(old)
	}
	return true
}

// update re-derives everything that depends on the object of key k (its
// current version, or nothing when deleted).
func (e *Engine) update(k objKey) {
	o := e.objs[k]
	switch k.kind {
	case v3.KindTier:
		e.updateTier(k, o)
	case v3.KindProfile:
		e.updateProfile(k, o)
	case v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy:
		e.updatePolicy(k, o)
	case v3.KindKubernetesEndpointSlice:
		s, _ := o.(*v3.KubernetesEndpointSlice)
		e.idx.setSlice(k, s)
	default:
		e.updateItem(k, o)
	}
}

// env is what loading an item reads of the Engine.
func (e *Engine) env() itemEnv { return itemEnv{node: e.node, profiles: e.profiles} }

// setProblems records the problems of the object of key k (ps is sorted
// and free of repeats: see problemSet).
func (e *Engine) setProblems(k objKey, ps []Problem) {
	old := e.problems[k]
	if slices.Equal(old, ps) {
		return
	}
	if len(ps) == 0 {
		delete(e.problems, k)
	} else {
		e.problems[k] = ps
	}
	e.delta.problems = true
}

// problemSet sorts ps and drops repeats.
func problemSet(ps []Problem) []Problem {
	slices.SortFunc(ps, compareProblems)
	return slices.Compact(ps)
}

// updateTier re-derives the effective tier of k.name and, when it
// changed, the policies naming it.
func (e *Engine) updateTier(k objKey, o any) {
	var ti *tierInfo
	var problems []Problem
	if t, ok := o.(*v3.Tier); ok {
		ti, problems = loadTier(t)
	}
	e.setProblems(k, problems)
	if ti == nil {
		ti = builtInTier(k.name)
	}
	old := e.tiers[k.name]
	if reflect.DeepEqual(old, ti) {
		return
	}
	if ti == nil {
		delete(e.tiers, k.name)
	} else {
		e.tiers[k.name] = ti
	}
	for _, pk := range sortedKeys(e.tierUsers[k.name]) {
		e.updatePolicy(pk, e.objs[pk])
	}
}

func sortedKeys(m map[objKey]bool) []objKey {
	out := make([]objKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, compareObjKeys)
	return out
}

func addUser(m map[string]map[objKey]bool, name string, k objKey) {
	s := m[name]
	if s == nil {
		s = map[objKey]bool{}
		m[name] = s
	}
	s[k] = true
}

func removeUser(m map[string]map[objKey]bool, name string, k objKey) {
	if s := m[name]; s != nil {
		delete(s, k)
		if len(s) == 0 {
			delete(m, name)
		}
	}
}

// Flush returns the Result for the current resources and what changed
// since the last Flush. The Result shares unchanged parts with earlier
// ones; treat it as read-only.
func (e *Engine) Flush() (*Result, *Delta) {
	e.idx.publish()
	prevSets := e.res.IPSets
	if e.delta.endpoints {
		eps := make([]Endpoint, len(e.sorted))
		for i, l := range e.sorted {
			eps[i] = l.ep
		}
		e.res.Endpoints = eps
	}
	if e.delta.policiesMap {
		e.res.Policies = maps.Clone(e.livePolicies)
	}
	if e.delta.profilesMap {
		e.res.Profiles = maps.Clone(e.liveProfiles)
	}
	if e.delta.ipsetsMap {
		e.res.IPSets = maps.Clone(e.idx.live)
	}
	if e.delta.problems {
		seen := map[Problem]bool{}
		for _, ps := range e.problems {
			for _, p := range ps {
				seen[p] = true
			}
		}
		e.res.Problems = slices.SortedFunc(maps.Keys(seen), compareProblems)
	}
	if e.delta.unrenderable {
		var us []Unrenderable
		for _, ps := range e.policies {
			us = append(us, ps.unrenderable...)
		}
		for _, pr := range e.profs {
			if pr.refd != nil {
				us = append(us, pr.refd.unrenderable...)
			}
		}
		slices.SortFunc(us, compareUnrenderable)
		e.res.Unrenderable = us
	}
	res := e.res // a copy: the next Flush does not change this one
	d := e.delta.build(prevSets, e.res.IPSets)
	e.delta.reset()
	return &res, d
}
