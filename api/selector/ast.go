package selector

import (
	"slices"
	"strings"
)

// op is the kind of a node. The zero op is opAll so that a zero node, and
// hence a zero Selector, matches everything.
type op uint8

const (
	opAll op = iota
	opGlobal
	opHas
	opEq
	opNe
	opIn
	opNotIn
	opContains
	opStartsWith
	opEndsWith
	opNot
	opAnd
	opOr
)

// node is one node of the evaluator tree. A single struct with a switch,
// rather than an interface per operator, keeps evaluation free of dynamic
// dispatch except for Labels.Get, and lets tests compare trees with cmp.
type node struct {
	op    op
	key   string   // label key for comparisons and has()
	value string   // operand of ==, !=, contains, starts with, ends with
	set   []string // operand of in / not in: sorted, no duplicates
	kids  []node   // one for !, two or more for && and ||
}

func (n *node) eval(l Labels) bool {
	switch n.op {
	case opAll:
		return true
	case opGlobal:
		_, ok := l.Get(NamespaceLabel)
		return !ok
	case opNot:
		return !n.kids[0].eval(l)
	case opAnd:
		for i := range n.kids {
			if !n.kids[i].eval(l) {
				return false
			}
		}
		return true
	case opOr:
		for i := range n.kids {
			if n.kids[i].eval(l) {
				return true
			}
		}
		return false
	}

	v, ok := l.Get(n.key)
	switch n.op {
	case opHas:
		return ok
	case opEq:
		return ok && v == n.value
	case opNe:
		return !ok || v != n.value
	case opIn:
		return ok && inSet(n.set, v)
	case opNotIn:
		return !ok || !inSet(n.set, v)
	case opContains:
		return ok && strings.Contains(v, n.value)
	case opStartsWith:
		return ok && strings.HasPrefix(v, n.value)
	case opEndsWith:
		return ok && strings.HasSuffix(v, n.value)
	}
	panic("selector: unknown node op")
}

func inSet(set []string, v string) bool {
	if len(set) <= 8 {
		for _, s := range set {
			if s == v {
				return true
			}
		}
		return false
	}
	_, found := slices.BinarySearch(set, v)
	return found
}

// newSet sorts and deduplicates the members in place.
func newSet(members []string) []string {
	slices.Sort(members)
	return slices.Compact(members)
}
