package selector

import "fmt"

// maxDepth bounds parenthesis nesting so that a hostile selector cannot
// exhaust the stack in parse, eval or String. Real selectors use a handful.
// (Calico has no such limit; see the package documentation.)
const maxDepth = 100

// parser is a recursive-descent parser with one token of lookahead that
// builds the same tree as Calico's parser:
//
//	or      = and { "||" and }
//	and     = unary { "&&" unary }
//	unary   = { "!" } primary
//	primary = "(" or ")" | "all(" ")" | "global(" ")" | "has(" key ")"
//	        | key ( "==" str | "!=" str | "contains" str | "starts" "with" str
//	              | "ends" "with" str | "in" set | "not" "in" set )
//	set     = "{" [ str { "," str } [ "," ] ] "}"
//
// An "or" or "and" of one operand is that operand; of several, one node
// holding them in order. Parentheses add no node, so grouping is kept: in
// (a && b) && c the first operand of the outer && is the inner &&. A run
// of "!" counts modulo 2, but a "!" outside parentheses does not cancel
// one inside: !!has(a) is has(a), !(!has(a)) is two nested negations.
type parser struct {
	lx    lexer
	tok   token // the lookahead
	depth int
}

func parse(s string) (node, error) {
	p := &parser{lx: lexer{src: s}}
	if err := p.advance(); err != nil {
		return node{}, err
	}
	if p.tok.kind == tokEOF {
		return node{op: opAll}, nil
	}
	n, err := p.parseOr()
	if err != nil {
		return node{}, err
	}
	if p.tok.kind != tokEOF {
		return node{}, p.expected("'&&', '||' or end of selector")
	}
	return n, nil
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	p.tok = t
	return err
}

func (p *parser) errorf(format string, args ...any) error {
	return &ParseError{Selector: p.lx.src, Pos: p.tok.pos, Msg: fmt.Sprintf(format, args...)}
}

// expected reports that the lookahead is not what the grammar needs here.
func (p *parser) expected(what string) error {
	if p.tok.kind == tokEOF {
		return p.errorf("expected %s", what)
	}
	return p.errorf("expected %s, found %s", what, p.tok.describe(p.lx.src))
}

func (p *parser) parseOr() (node, error) {
	return p.parseBinary(opOr, tokOr, p.parseAnd)
}

func (p *parser) parseAnd() (node, error) {
	return p.parseBinary(opAnd, tokAnd, p.parseUnary)
}

// parseBinary parses operands separated by sep: the operand itself if
// there is one, otherwise a kind node with the operands in order.
func (p *parser) parseBinary(kind op, sep tokKind, operand func() (node, error)) (node, error) {
	n, err := operand()
	if err != nil || p.tok.kind != sep {
		return n, err
	}
	kids := []node{n}
	for p.tok.kind == sep {
		if err := p.advance(); err != nil {
			return node{}, err
		}
		if n, err = operand(); err != nil {
			return node{}, err
		}
		kids = append(kids, n)
	}
	return node{op: kind, kids: kids}, nil
}

func (p *parser) parseUnary() (node, error) {
	negated := false
	for p.tok.kind == tokNot {
		negated = !negated
		if err := p.advance(); err != nil {
			return node{}, err
		}
	}
	n, err := p.parsePrimary()
	if err != nil {
		return node{}, err
	}
	if negated {
		n = node{op: opNot, kids: []node{n}}
	}
	return n, nil
}

func (p *parser) parsePrimary() (node, error) {
	switch p.tok.kind {
	case tokLParen:
		return p.parseParens()
	case tokFunc:
		return p.parseFunction(p.tok.text)
	case tokWord:
		key, err := p.labelKey()
		if err != nil {
			return node{}, err
		}
		return p.parseComparison(key)
	}
	return node{}, p.expected("a label, '!', '(', has(), all() or global()")
}

// labelKey returns the lookahead word as a label key, refusing keys longer
// than Calico allows. It does not advance.
func (p *parser) labelKey() (string, error) {
	if len(p.tok.text) > MaxLabelLength {
		return "", p.errorf("label is %d characters long, longer than the maximum %d",
			len(p.tok.text), MaxLabelLength)
	}
	return p.tok.text, nil
}

func (p *parser) parseParens() (node, error) {
	open := p.tok.pos
	if p.depth >= maxDepth {
		return node{}, p.errorf("parentheses nested more than %d deep", maxDepth)
	}
	p.depth++
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil {
		return node{}, err
	}
	n, err := p.parseOr()
	if err != nil {
		return node{}, err
	}
	if p.tok.kind != tokRParen {
		return node{}, p.expected(fmt.Sprintf("'&&', '||' or ')' to close '(' at position %d", open))
	}
	return n, p.advance()
}

// parseFunction parses the rest of has(k), all() or global(); the
// lookahead is the name with its "(".
func (p *parser) parseFunction(name string) (node, error) {
	if err := p.advance(); err != nil {
		return node{}, err
	}
	var n node
	switch name {
	case "has":
		if p.tok.kind != tokWord {
			return node{}, p.expected("a label in has()")
		}
		key, err := p.labelKey()
		if err != nil {
			return node{}, err
		}
		n = node{op: opHas, key: key}
		if err := p.advance(); err != nil {
			return node{}, err
		}
	case "all":
		n = node{op: opAll}
	case "global":
		n = node{op: opGlobal}
	}
	if p.tok.kind != tokRParen {
		return node{}, p.expected(fmt.Sprintf("')' to close %s(", name))
	}
	return n, p.advance()
}

// parseComparison parses the operator and operand after label key; the
// lookahead is the key.
func (p *parser) parseComparison(key string) (node, error) {
	t, kind, err := p.lx.nextOperator()
	p.tok = t
	if err != nil {
		return node{}, err
	}
	switch t.kind {
	case tokEq:
		kind = opEq
	case tokNe:
		kind = opNe
	}
	if kind == opAll && t.kind == tokWord {
		// The first word of a two-word operator without its second word
		// ("a starts 'x'"): say what is missing, after the first word.
		for _, wo := range wordOperators {
			if len(wo.words) == 2 && t.text == wo.words[0] {
				if err := p.advance(); err != nil {
					return node{}, err
				}
				return node{}, p.expected(fmt.Sprintf("'%s' after '%s'", wo.words[1], wo.words[0]))
			}
		}
	}
	if kind == opAll { // not an operator
		return node{}, p.expected(fmt.Sprintf(
			"an operator (==, !=, in, not in, contains, starts with, ends with) after label %q", key))
	}
	if err := p.advance(); err != nil {
		return node{}, err
	}

	if kind == opIn || kind == opNotIn {
		set, err := p.parseSet()
		if err != nil {
			return node{}, err
		}
		return node{op: kind, key: key, set: set}, nil
	}
	if p.tok.kind != tokString {
		return node{}, p.expected("a quoted string")
	}
	n := node{op: kind, key: key, value: p.tok.text}
	return n, p.advance()
}

func (p *parser) parseSet() ([]string, error) {
	if p.tok.kind != tokLBrace {
		return nil, p.expected("'{' to start a set")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	var members []string
	for p.tok.kind != tokRBrace {
		if p.tok.kind != tokString {
			return nil, p.expected("a quoted string or '}'")
		}
		members = append(members, p.tok.text)
		if err := p.advance(); err != nil {
			return nil, err
		}
		switch p.tok.kind {
		case tokComma: // also allows a trailing comma, as Calico does
			if err := p.advance(); err != nil {
				return nil, err
			}
		case tokRBrace:
		default:
			return nil, p.expected("',' or '}'")
		}
	}
	return newSet(members), p.advance()
}
