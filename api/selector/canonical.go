package selector

import "strings"

const allString = "all()"

// String renders n in canonical form (see the package documentation).
func (n node) String() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func (n *node) write(b *strings.Builder) {
	switch n.op {
	case opAll:
		b.WriteString(allString)
	case opGlobal:
		b.WriteString("global()")
	case opHas:
		b.WriteString("has(")
		b.WriteString(n.key)
		b.WriteByte(')')
	case opEq:
		writeComparison(b, n.key, " == ", n.value)
	case opNe:
		writeComparison(b, n.key, " != ", n.value)
	case opContains:
		writeComparison(b, n.key, " contains ", n.value)
	case opStartsWith:
		writeComparison(b, n.key, " starts with ", n.value)
	case opEndsWith:
		writeComparison(b, n.key, " ends with ", n.value)
	case opIn, opNotIn:
		b.WriteString(n.key)
		if n.op == opIn {
			b.WriteString(" in {")
		} else {
			b.WriteString(" not in {")
		}
		for i, v := range n.set {
			if i > 0 {
				b.WriteString(", ")
			}
			writeQuoted(b, v)
		}
		b.WriteByte('}')
	case opNot:
		b.WriteByte('!')
		k := &n.kids[0]
		// has(), all() and global() read naturally after "!"; anything
		// else gets parentheses: needed for && and ||, clearer for
		// comparisons (!(a == "x") rather than !a == "x").
		paren := k.op != opHas && k.op != opAll && k.op != opGlobal
		writeMaybeParen(b, k, paren)
	case opAnd, opOr:
		sep := " && "
		if n.op == opOr {
			sep = " || "
		}
		for i := range n.kids {
			if i > 0 {
				b.WriteString(sep)
			}
			k := &n.kids[i]
			// && binds tighter than ||, so only a || under && (or a
			// nested same operator, which parse flattens away) needs
			// parentheses.
			writeMaybeParen(b, k, k.op == opOr || k.op == n.op)
		}
	default:
		panic("selector: unknown node op")
	}
}

func writeMaybeParen(b *strings.Builder, n *node, paren bool) {
	if paren {
		b.WriteByte('(')
	}
	n.write(b)
	if paren {
		b.WriteByte(')')
	}
}

func writeComparison(b *strings.Builder, key, operator, value string) {
	b.WriteString(key)
	b.WriteString(operator)
	writeQuoted(b, value)
}

// writeQuoted writes v in double quotes, or in single quotes if v contains
// a double quote. The language has no escapes, so a value holding both
// kinds cannot be written; parse never produces one.
func writeQuoted(b *strings.Builder, v string) {
	q := byte('"')
	if strings.IndexByte(v, '"') >= 0 {
		q = '\''
	}
	b.WriteByte(q)
	b.WriteString(v)
	b.WriteByte(q)
}
