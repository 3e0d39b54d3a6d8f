package calc

import (
	"hash/maphash"
	"maps"
	"reflect"
	"slices"
)

// localState is one local endpoint in the Engine: as loaded, the
// policies selecting it and its Endpoint with the tier lists built.
type localState struct {
	key  objKey
	le   localEndpoint
	pols map[objKey]*policyState
	ep   Endpoint
}

// updateItem re-derives an endpoint or network set: its problems, its
// labels in the index, and, for a local endpoint, its policy lists.
func (e *Engine) updateItem(k objKey, o any) {
	if r, ok := o.(*remoteWEP); ok {
		o = r.expand()
	}
	l := e.env().loadItem(o)
	e.setProblems(k, problemSet(l.problems))
	if old, ok := e.itemProfiles[k]; ok {
		for _, name := range old {
			removeUser(e.profileUsers, name, k)
		}
		delete(e.itemProfiles, k)
	}
	if profs := itemProfiles(o); len(profs) > 0 {
		e.itemProfiles[k] = profs
		for _, name := range profs {
			addUser(e.profileUsers, name, k)
		}
	}
	var oldMember *labelled
	if it := e.idx.items[k]; it != nil {
		oldMember = it.m
	}
	if m := l.member; m != nil {
		sh := e.labelSets.internShared(m.labels)
		m.labels, m.shared = sh.labels, sh
	}
	e.idx.setItem(k, l.member)
	if oldMember != nil {
		e.labelSets.release(oldMember.labels)
	}
	e.setLocal(k, l.local)
}

// labelSets interns the items' effective label maps, so that the
// endpoints of the cluster with the same labels (the replicas of a
// workload) share one map instead of holding a copy each. Interned maps
// are never modified.
type labelSets struct {
	// byHash holds the shared maps by labelsHash (maps with the same
	// hash, rare, share a slot).
	byHash map[uint64][]*sharedLabels
}

type sharedLabels struct {
	labels map[string]string
	refs   int
	// matches remembers, per selector bucket of the label index (a
	// namespace, or "" for the global selectors), the selectors of that
	// bucket matching labels, while the bucket is unchanged: the
	// endpoints with the same labels (a workload's replicas) are
	// evaluated once.
	matches map[string]bucketMatches
}

type bucketMatches struct {
	version uint64
	sels    []*selState
}

// labelSeed seeds labelsHash; the hashes only find equal maps, results
// never depend on them.
var labelSeed = maphash.MakeSeed()

// labelsHash is a hash of labels that does not depend on the order of
// the map: a sum over its pairs (no sorting, no allocation).
func labelsHash(labels map[string]string) uint64 {
	h := uint64(len(labels))
	for k, v := range labels {
		x := maphash.String(labelSeed, k) ^ (maphash.String(labelSeed, v) * 0x9e3779b97f4a7c15)
		x ^= x >> 31
		x *= 0xbf58476d1ce4e5b9
		h += x ^ (x >> 29)
	}
	return h
}

// intern returns the shared map equal to labels, counting one more user.
func (ls *labelSets) intern(labels map[string]string) map[string]string {
	return ls.internShared(labels).labels
}

// internShared is intern, returning the shared entry.
func (ls *labelSets) internShared(labels map[string]string) *sharedLabels {
	if ls.byHash == nil {
		ls.byHash = map[uint64][]*sharedLabels{}
	}
	h := labelsHash(labels)
	slot := ls.byHash[h]
	for _, sh := range slot {
		if maps.Equal(sh.labels, labels) {
			sh.refs++
			return sh
		}
	}
	sh := &sharedLabels{labels: labels, refs: 1}
	ls.byHash[h] = append(slot, sh)
	return sh
}

// release counts one user less of the interned map labels.
func (ls *labelSets) release(labels map[string]string) {
	h := labelsHash(labels)
	slot := ls.byHash[h]
	for i, sh := range slot {
		if !maps.Equal(sh.labels, labels) {
			continue
		}
		if sh.refs--; sh.refs == 0 {
			if len(slot) == 1 {
				delete(ls.byHash, h)
			} else {
				ls.byHash[h] = slices.Delete(slot, i, i+1)
			}
		}
		return
	}
}

func compareLocals(a, b *localState) int { return compareEndpointRefs(a.le.ep.ref(), b.le.ep.ref()) }

// setLocal replaces the local endpoint of key k by le (nil: none).
func (e *Engine) setLocal(k objKey, le *localEndpoint) {
	old := e.locals[k]
	if old == nil && le == nil {
		return
	}
	if le == nil {
		for pk, ps := range old.pols {
			delete(ps.selected, k)
			delete(old.pols, pk)
			e.syncPolicy(ps)
		}
		i, _ := slices.BinarySearchFunc(e.sorted, old, compareLocals)
		e.sorted = slices.Delete(e.sorted, i, i+1)
		delete(e.locals, k)
		e.delta.endpoint(old.le.ep.ref())
		e.useProfiles(old.le.ep.Profiles, -1)
		return
	}
	l := old
	labelsChanged := true
	if l == nil {
		l = &localState{key: k, le: *le, pols: map[objKey]*policyState{}}
		e.locals[k] = l
		i, _ := slices.BinarySearchFunc(e.sorted, l, compareLocals)
		e.sorted = slices.Insert(e.sorted, i, l)
	} else {
		labelsChanged = !maps.Equal(l.le.labels, le.labels)
		prev := l.le.ep.Profiles
		l.le = *le
		e.useProfiles(le.ep.Profiles, +1)
		e.useProfiles(prev, -1)
		le = nil // profiles done
	}
	if le != nil {
		e.useProfiles(le.ep.Profiles, +1)
	}
	if labelsChanged {
		for pk, ps := range e.policies {
			if ps.p == nil {
				continue
			}
			want := ps.p.sel.matches(l.le.labels)
			if _, had := l.pols[pk]; had == want {
				continue
			}
			if want {
				l.pols[pk] = ps
				ps.selected[k] = l
			} else {
				delete(l.pols, pk)
				delete(ps.selected, k)
			}
			e.syncPolicy(ps)
		}
	}
	e.rebuild(l)
}

// rebuild builds l's tier lists from the policies selecting it, keeping
// the old Endpoint (and its slices' identity) when nothing changed.
func (e *Engine) rebuild(l *localState) {
	pols := make([]*parsedPolicy, 0, len(l.pols))
	for _, ps := range l.pols {
		pols = append(pols, ps.p)
	}
	slices.SortFunc(pols, comparePolicies)
	ep := l.le.ep
	for _, p := range pols {
		addToEndpoint(&ep, p)
	}
	if reflect.DeepEqual(ep, l.ep) {
		return
	}
	l.ep = ep
	e.delta.endpoint(l.le.ep.ref())
}

// useProfiles counts (by +1 or -1) a local endpoint's use of each of its
// profiles: the used ones are in the Result with their rules and sets.
func (e *Engine) useProfiles(names []string, by int) {
	for i, name := range names {
		if slices.Contains(names[:i], name) {
			continue
		}
		pr := e.prof(name)
		pr.uses += by
		e.syncProfile(name)
	}
}
