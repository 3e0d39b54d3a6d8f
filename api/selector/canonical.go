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
		// As in Calico: "!" directly before its operand, which brings its
		// own parentheses if it is an && or ||. !(a == "x") is written
		// !a == "x", which parses back to the same tree.
		b.WriteByte('!')
		n.kids[0].write(b)
	case opAnd, opOr:
		// Always parenthesised, nested groups included, so the grouping
		// of the input is kept: ((a && b) && c) is not (a && b && c).
		sep := " && "
		if n.op == opOr {
			sep = " || "
		}
		b.WriteByte('(')
		for i := range n.kids {
			if i > 0 {
				b.WriteString(sep)
			}
			n.kids[i].write(b)
		}
		b.WriteByte(')')
	default:
		panic("selector: unknown node op")
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
