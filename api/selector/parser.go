package selector

import "fmt"

// maxDepth bounds parenthesis nesting so that a hostile selector cannot
// exhaust the stack in parse, eval or String. Real selectors use a handful.
const maxDepth = 100

// parser is a recursive-descent parser with one token of lookahead:
//
//	or      = and { "||" and }
//	and     = unary { "&&" unary }
//	unary   = { "!" } primary
//	primary = "(" or ")" | "all" "(" ")" | "global" "(" ")" | "has" "(" key ")"
//	        | key ( "==" str | "!=" str | "contains" str | "starts" "with" str
//	              | "ends" "with" str | "in" set | "not" "in" set )
//	set     = "{" [ str { "," str } [ "," ] ] "}"
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

// parseBinary parses operands separated by sep into one flat kind node.
func (p *parser) parseBinary(kind op, sep tokKind, operand func() (node, error)) (node, error) {
	n, err := operand()
	if err != nil || p.tok.kind != sep {
		return n, err
	}
	kids := appendFlat(nil, kind, n)
	for p.tok.kind == sep {
		if err := p.advance(); err != nil {
			return node{}, err
		}
		if n, err = operand(); err != nil {
			return node{}, err
		}
		kids = appendFlat(kids, kind, n)
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
		n = negate(n)
	}
	return n, nil
}

func (p *parser) parsePrimary() (node, error) {
	switch p.tok.kind {
	case tokLParen:
		return p.parseParens()
	case tokWord:
		word := p.tok.text
		if err := p.advance(); err != nil {
			return node{}, err
		}
		if p.tok.kind == tokLParen {
			switch word {
			case "has", "all", "global":
				return p.parseFunction(word)
			}
		}
		return p.parseComparison(word)
	}
	return node{}, p.expected("a label, '!', '(', has(), all() or global()")
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
// lookahead is the "(".
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
		n = node{op: opHas, key: p.tok.text}
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

// parseComparison parses the operator and operand after label key.
func (p *parser) parseComparison(key string) (node, error) {
	var kind op
	switch p.tok.kind {
	case tokEq:
		kind = opEq
	case tokNe:
		kind = opNe
	case tokWord:
		switch p.tok.text {
		case "in":
			kind = opIn
		case "not":
			kind = opNotIn
		case "contains":
			kind = opContains
		case "starts":
			kind = opStartsWith
		case "ends":
			kind = opEndsWith
		}
	}
	if kind == opAll { // not an operator
		return node{}, p.expected(fmt.Sprintf(
			"an operator (==, !=, in, not in, contains, starts with, ends with) after label %q", key))
	}
	first := p.tok.text
	if err := p.advance(); err != nil {
		return node{}, err
	}

	// The second word of two-word operators.
	var second string
	switch kind {
	case opNotIn:
		second = "in"
	case opStartsWith, opEndsWith:
		second = "with"
	}
	if second != "" {
		if p.tok.kind != tokWord || p.tok.text != second {
			return node{}, p.expected(fmt.Sprintf("'%s' after '%s'", second, first))
		}
		if err := p.advance(); err != nil {
			return node{}, err
		}
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
