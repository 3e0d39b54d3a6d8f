package calc

import v3 "github.com/tabbynet/tabby/api/v3"

// memberKey identifies a labelled object's labels across computations: the
// object (by pointer) and the profiles its labels inherit from. Objects
// with more than maxKeyProfiles profiles get a key that never repeats.
type memberKey struct {
	obj   any
	profs [maxKeyProfiles]*v3.Profile
}

const maxKeyProfiles = 4

func (c *computer) memberKey(obj any, profiles []string) memberKey {
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
	next   *matchCache
}

func newMatchSet(keys []memberKey, labels []map[string]string, old *matchCache) *matchSet {
	return &matchSet{keys: keys, labels: labels, old: old, next: &matchCache{results: map[string][]bool{}}}
}

func (s *matchSet) eval(m *matcher) []bool {
	if r, ok := s.next.results[m.id]; ok {
		return r
	}
	var prev []bool
	if s.old != nil {
		prev = s.old.results[m.id]
	}
	if prev != nil && s.remap == nil {
		s.remap = make([]int, len(s.keys))
		for i, k := range s.keys {
			if j, ok := s.old.index[k]; ok {
				s.remap[i] = j
			} else {
				s.remap[i] = -1
			}
		}
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

// done returns the cache to keep for the next computation.
func (s *matchSet) done() *matchCache {
	s.next.keys = s.keys
	s.next.index = make(map[memberKey]int, len(s.keys))
	for i, k := range s.keys {
		s.next.index[k] = i
	}
	return s.next
}
