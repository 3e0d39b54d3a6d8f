package calc

import (
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/google/btree"
)

// MemberList is an immutable, sorted list of ipset members without
// duplicates. It is either a plain list (Members, Compute's sets) or a
// snapshot of the members the Engine keeps for a set: the Engine's sets
// are B-trees cloned copy-on-write at each publication, so that
// publishing a set changed by one member costs that member (a path of
// the tree), not the set's size, and every published version stays valid
// while later ones are made. A consumer that needs the list as a slice
// (a full write of the set) calls Slice, which builds it once per
// snapshot.
//
// The zero MemberList is empty. Compare MemberLists with Equal (the same
// members), not ==.
type MemberList struct {
	plain []string
	tree  *btree.BTreeG[string] // a snapshot: never written
	mat   *materialised         // the tree's members as a slice, built on demand
}

type materialised struct {
	once sync.Once
	s    []string
}

// Members returns the list of members, which must be sorted and free of
// duplicates (SortedMembers sorts and compacts). The slice is kept, not
// copied: it must not be modified afterwards.
func Members(sorted ...string) MemberList {
	if len(sorted) == 0 {
		return MemberList{}
	}
	return MemberList{plain: sorted}
}

// SortedMembers sorts and compacts members (in place) into a list.
func SortedMembers(members []string) MemberList {
	slices.Sort(members)
	return Members(slices.Clip(slices.Compact(members))...)
}

// snapshot is the list of a tree's current members; the tree is cloned,
// so the caller may go on writing its own.
func snapshot(t *btree.BTreeG[string]) MemberList {
	if t.Len() == 0 {
		return MemberList{}
	}
	return MemberList{tree: t.Clone(), mat: &materialised{}}
}

// Len is the number of members.
func (l MemberList) Len() int {
	if l.tree != nil {
		return l.tree.Len()
	}
	return len(l.plain)
}

// Slice returns the members, sorted. It must not be modified.
func (l MemberList) Slice() []string {
	if l.tree == nil {
		return l.plain
	}
	l.mat.once.Do(func() {
		s := make([]string, 0, l.tree.Len())
		l.tree.Ascend(func(m string) bool {
			s = append(s, m)
			return true
		})
		l.mat.s = s
	})
	return l.mat.s
}

// All yields the members in order.
func (l MemberList) All() iter.Seq[string] {
	return func(yield func(string) bool) {
		if l.tree == nil {
			for _, m := range l.plain {
				if !yield(m) {
					return
				}
			}
			return
		}
		l.tree.Ascend(func(m string) bool { return yield(m) })
	}
}

// Has reports whether m is a member.
func (l MemberList) Has(m string) bool {
	if l.tree != nil {
		return l.tree.Has(m)
	}
	_, ok := slices.BinarySearch(l.plain, m)
	return ok
}

// Same reports whether l and o are the same list (the same snapshot or
// slice): then they are Equal without a comparison.
func (l MemberList) Same(o MemberList) bool {
	if l.tree != nil || o.tree != nil {
		return l.tree == o.tree
	}
	if len(l.plain) != len(o.plain) {
		return false
	}
	return len(l.plain) == 0 || &l.plain[0] == &o.plain[0]
}

// Equal reports whether l and o hold the same members.
func (l MemberList) Equal(o MemberList) bool {
	return l.Same(o) || (l.Len() == o.Len() && slices.Equal(l.Slice(), o.Slice()))
}

// String is the members as fmt prints a slice.
func (l MemberList) String() string {
	return "[" + strings.Join(l.Slice(), " ") + "]"
}

// memberTree is an empty tree of members, for an Engine set.
func memberTree() *btree.BTreeG[string] { return btree.NewOrderedG[string](32) }
