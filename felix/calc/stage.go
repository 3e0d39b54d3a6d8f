package calc

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// endpointStage remembers the outcome of loadEndpoints: it depends only on
// the node, the (deduplicated, valid) profiles and the endpoint objects,
// so when none of those changed (a policy change, the common case) the
// whole pass over every endpoint of the cluster is skipped. Its per-object
// memo is separate from the Memo's own entries so that skipping the stage
// does not let them expire.
type endpointStage struct {
	node     string
	profiles map[string]*v3.Profile
	weps     objectSet[*v3.WorkloadEndpoint]
	heps     objectSet[*v3.HostEndpoint]

	members  []labelled
	locals   []localEndpoint
	problems []Problem
	// sortedWEPs is the workload endpoints deduplicated and sorted, as
	// loadEndpoints uses them; wepDuplicates says some were dropped.
	sortedWEPs    []*v3.WorkloadEndpoint
	wepDuplicates bool
	// perWEP is each workload endpoint's contribution.
	perWEP map[*v3.WorkloadEndpoint]*wepOut

	memo *Memo // per-endpoint work, swept only when the stage runs
}

// objectSet is a list of objects as last passed in, with its multiset of
// pointers built on first need.
type objectSet[T comparable] struct {
	list   []T
	counts map[T]int
}

// same reports whether objs holds exactly the objects of s, in any order.
func (s *objectSet[T]) same(objs []T) bool {
	if len(objs) != len(s.list) {
		return false
	}
	if slices.Equal(objs, s.list) {
		return true
	}
	if s.counts == nil {
		s.counts = countObjects(s.list)
	}
	return maps.Equal(s.counts, countObjects(objs))
}

func countObjects[T comparable](objs []T) map[T]int {
	m := make(map[T]int, len(objs))
	for _, o := range objs {
		m[o]++
	}
	return m
}

// loadEndpointsStaged is loadEndpoints, reusing the last outcome when its
// inputs are unchanged.
func (c *computer) loadEndpointsStaged(weps []*v3.WorkloadEndpoint, heps []*v3.HostEndpoint) {
	if c.memo == nil {
		c.loadEndpoints(weps, heps)
		return
	}
	st := c.memo.endpoints
	if st != nil && st.node == c.node && maps.Equal(st.profiles, c.profiles) && st.weps.same(weps) && st.heps.same(heps) {
		c.replayEndpoints(st)
		return
	}
	next := &endpointStage{
		node: c.node, profiles: maps.Clone(c.profiles),
		weps: objectSet[*v3.WorkloadEndpoint]{list: slices.Clone(weps)},
		heps: objectSet[*v3.HostEndpoint]{list: slices.Clone(heps)},
		memo: NewMemo(),
	}
	if st != nil {
		next.memo = st.memo
	}
	sub := &computer{node: c.node, problems: map[Problem]bool{}, profiles: c.profiles, memo: next.memo}
	if st != nil {
		sub.sortedWEPs = st.patchSortedWEPs(weps)
		if st.node == c.node && maps.Equal(st.profiles, c.profiles) {
			sub.wepsPrev = st.perWEP
		}
	}
	sub.wepsNext = make(map[*v3.WorkloadEndpoint]*wepOut, len(weps))
	next.memo.begin()
	sub.loadEndpoints(weps, heps)
	next.memo.end()
	next.sortedWEPs, next.wepDuplicates = sub.sortedWEPs, sub.wepDuplicates
	next.perWEP = sub.wepsNext
	next.members, next.locals = slices.Clip(sub.members), slices.Clip(sub.locals)
	for p := range sub.problems {
		next.problems = append(next.problems, p)
	}
	c.memo.endpoints = next
	c.replayEndpoints(next)
}

func (c *computer) replayEndpoints(st *endpointStage) {
	c.members = append(c.members, st.members...)
	c.locals = append(c.locals, st.locals...)
	for _, p := range st.problems {
		c.problems[p] = true
	}
}

// maxPatch is the most added plus removed workload endpoints for which
// last time's sorted list is patched rather than sorted again.
const maxPatch = 64

// patchSortedWEPs returns the deduplicated sorted list of weps by patching
// last time's with the endpoints that came and went, or nil when it
// cannot (duplicates involved, too many changes): then dedupe sorts.
func (st *endpointStage) patchSortedWEPs(weps []*v3.WorkloadEndpoint) []*v3.WorkloadEndpoint {
	if st.wepDuplicates || st.sortedWEPs == nil || len(st.sortedWEPs) != len(st.weps.list) {
		return nil
	}
	if st.weps.counts == nil {
		st.weps.counts = countObjects(st.weps.list)
	}
	now := countObjects(weps)
	var added []*v3.WorkloadEndpoint
	removed := map[*v3.WorkloadEndpoint]bool{}
	for w, n := range now {
		if n > 1 {
			return nil
		}
		if st.weps.counts[w] == 0 {
			added = append(added, w)
		}
	}
	for w := range st.weps.counts {
		if now[w] == 0 {
			removed[w] = true
		}
	}
	if len(added)+len(removed) > maxPatch {
		return nil
	}
	out := make([]*v3.WorkloadEndpoint, 0, len(st.sortedWEPs)+len(added))
	for _, w := range st.sortedWEPs {
		if !removed[w] {
			out = append(out, w)
		}
	}
	for _, w := range added {
		i, found := slices.BinarySearchFunc(out, w, compareWEPKey)
		if found || (i > 0 && compareWEPKey(out[i-1], w) == 0) {
			return nil // a second object of the same name: dedupe decides
		}
		out = slices.Insert(out, i, w)
	}
	return out
}

// compareWEPKey orders workload endpoints by namespace and name.
func compareWEPKey(a, b *v3.WorkloadEndpoint) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}
