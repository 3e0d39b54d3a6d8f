package calc

import (
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// memberKey identifies a labelled object's labels across computations: the
// object (by pointer) and the profiles its labels inherit from. Objects
// with more than maxKeyProfiles profiles get a key that never repeats.
type memberKey struct {
	obj   any
	profs [maxKeyProfiles]*v3.Profile
}

const maxKeyProfiles = 4

func (c *computer) memberKey(obj any, profiles []string) memberKey {
	if c.noKeys {
		// The Engine memoises nothing by key: holding the object here
		// would keep every decoded endpoint alive.
		return memberKey{}
	}
	k := memberKey{obj: obj}
	if len(profiles) > maxKeyProfiles {
		k.obj = new(byte)
		return k
	}
	for i, name := range profiles {
		k.profs[i] = c.profiles[name]
	}
	return k
}

// matchCache is what one computation learnt about one list of labelled
// objects: for each matcher ID, which objects it matches.
type matchCache struct {
	keys    []memberKey
	index   map[memberKey]int
	results map[string][]bool
	// selected holds, for the matchers asked with selected, the indices
	// of the matching objects.
	selected map[string][]int32
}

// matchSet evaluates matchers over one list of labelled objects, copying
// the previous computation's answers for objects whose labels cannot have
// changed and evaluating only the rest. With no previous cache it simply
// evaluates.
type matchSet struct {
	keys   []memberKey
	labels []map[string]string
	old    *matchCache
	remap  []int // index in old of each key, -1 if new; built on first use
	// same: the keys are exactly old's, in order, so old's answers are
	// reused as they are.
	same bool
	// added are the indices of keys not in old, removed the indices in
	// old of keys no longer here (built with remap).
	added, removed []int
	next           *matchCache
}

func newMatchSet(keys []memberKey, labels []map[string]string, old *matchCache) *matchSet {
	s := &matchSet{keys: keys, labels: labels, old: old, next: &matchCache{results: map[string][]bool{}, selected: map[string][]int32{}}}
	s.same = old != nil && slices.Equal(old.keys, keys)
	return s
}

func (s *matchSet) eval(m *matcher) []bool {
	if r, ok := s.next.results[m.id]; ok {
		return r
	}
	var prev []bool
	if s.old != nil {
		prev = s.old.results[m.id]
	}
	if prev != nil && s.same {
		// Answers are never modified once computed: share them.
		s.next.results[m.id] = prev
		return prev
	}
	if prev != nil {
		s.buildRemap()
	}
	r := make([]bool, len(s.keys))
	for i := range s.keys {
		if prev != nil && s.remap[i] >= 0 {
			r[i] = prev[s.remap[i]]
		} else {
			r[i] = m.matches(s.labels[i])
		}
	}
	s.next.results[m.id] = r
	return r
}

func (s *matchSet) buildRemap() {
	if s.remap != nil {
		return
	}
	s.remap = make([]int, len(s.keys))
	used := make([]bool, len(s.old.keys))
	for i, k := range s.keys {
		if j, ok := s.old.index[k]; ok {
			s.remap[i] = j
			used[j] = true
		} else {
			s.remap[i] = -1
			s.added = append(s.added, i)
		}
	}
	for j, u := range used {
		if !u {
			s.removed = append(s.removed, j)
		}
	}
}

// mayDiffer reports whether anything built from m's matches (an ipset's
// members) can differ from last time: only when m matches an object that
// came or went, since the objects in both lists are the same objects
// with the same profiles. Without last time's answers it says true.
func (s *matchSet) mayDiffer(m *matcher) bool {
	if s.old == nil {
		return true
	}
	prev := s.old.results[m.id]
	if prev == nil {
		return true
	}
	r := s.eval(m)
	if s.same {
		return false
	}
	s.buildRemap()
	for _, i := range s.added {
		if r[i] {
			return true
		}
	}
	for _, j := range s.removed {
		if prev[j] {
			return true
		}
	}
	return false
}

// selected returns the indices of the objects m matches, ascending.
func (s *matchSet) selected(m *matcher) []int32 {
	if r, ok := s.next.selected[m.id]; ok {
		return r
	}
	if s.same {
		if r, ok := s.old.selected[m.id]; ok {
			s.next.selected[m.id] = r
			s.next.results[m.id] = s.old.results[m.id]
			return r
		}
	}
	var r []int32
	for i, ok := range s.eval(m) {
		if ok {
			r = append(r, int32(i))
		}
	}
	s.next.selected[m.id] = r
	return r
}

// done returns the cache to keep for the next computation.
func (s *matchSet) done() *matchCache {
	s.next.keys = s.keys
	if s.same {
		s.next.index = s.old.index
		return s.next
	}
	s.next.index = make(map[memberKey]int, len(s.keys))
	for i, k := range s.keys {
		s.next.index[k] = i
	}
	return s.next
}
