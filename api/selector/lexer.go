package selector

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tokEOF    tokKind = iota
	tokWord           // a label key: a run of key characters
	tokFunc           // "has(", "all(" or "global(" with no space before "("; text is the name
	tokString         // a quoted string; text is the value without quotes
	tokLParen
	tokRParen
	tokLBrace
	tokRBrace
	tokComma
	tokEq  // ==
	tokNe  // !=
	tokNot // !
	tokAnd // &&
	tokOr  // ||
	tokBad // a character that starts no token
)

// MaxLabelLength is the longest label key a selector may name, in bytes,
// as in Calico's tokenizer.
const MaxLabelLength = 512

type token struct {
	kind tokKind
	pos  int    // byte offset of the first character
	end  int    // byte offset just past the token
	text string // word, function name, string value, or the bad character
}

// lexer splits a selector into tokens on demand. Like Calico's tokenizer
// it is context-sensitive in one place: right after a label the parser
// asks for an operator (nextOperator), where words are read as operator
// keywords rather than labels.
type lexer struct {
	src string
	pos int
}

// isSpace reports whether c is whitespace between tokens. Calico's
// tokenizer skips only spaces and tabs; a newline, carriage return,
// vertical tab or form feed starts no token, so the selector is invalid.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t'
}

// isKeyChar reports whether c may appear in a label key: the characters of
// a Kubernetes qualified name, as in Calico's tokenizer.
func isKeyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '/'
}

func (lx *lexer) skipSpace() {
	for lx.pos < len(lx.src) && isSpace(lx.src[lx.pos]) {
		lx.pos++
	}
}

// functions are the names that, written directly before "(" with no space
// between, are has(), all() and global() rather than labels.
var functions = [...]string{"has", "all", "global"}

// next returns the next token. The only error is an unterminated string.
func (lx *lexer) next() (token, error) {
	lx.skipSpace()
	src := lx.src
	start := lx.pos
	if start == len(src) {
		return token{kind: tokEOF, pos: start, end: start}, nil
	}
	tok := func(k tokKind, n int) (token, error) {
		lx.pos += n
		return token{kind: k, pos: start, end: lx.pos, text: src[start:lx.pos]}, nil
	}
	followedBy := func(c byte) bool { return start+1 < len(src) && src[start+1] == c }

	switch c := src[start]; c {
	case '(':
		return tok(tokLParen, 1)
	case ')':
		return tok(tokRParen, 1)
	case '{':
		return tok(tokLBrace, 1)
	case '}':
		return tok(tokRBrace, 1)
	case ',':
		return tok(tokComma, 1)
	case '=':
		if followedBy('=') {
			return tok(tokEq, 2)
		}
	case '!':
		if followedBy('=') {
			return tok(tokNe, 2)
		}
		return tok(tokNot, 1)
	case '&':
		if followedBy('&') {
			return tok(tokAnd, 2)
		}
	case '|':
		if followedBy('|') {
			return tok(tokOr, 2)
		}
	case '\'', '"':
		n := strings.IndexByte(src[start+1:], c)
		if n < 0 {
			return token{}, &ParseError{Selector: src, Pos: start,
				Msg: fmt.Sprintf("unterminated string: no closing %c", c)}
		}
		lx.pos = start + 1 + n + 1
		return token{kind: tokString, pos: start, end: lx.pos, text: src[start+1 : start+1+n]}, nil
	default:
		if isKeyChar(c) {
			n := keyLen(src[start:])
			// "has(", "all(" and "global(" are functions only with no
			// space before the "(": "has (a)" is the label "has"
			// followed by "(", which Calico rejects.
			if start+n < len(src) && src[start+n] == '(' {
				for _, f := range functions {
					if src[start:start+n] == f {
						lx.pos = start + n + 1
						return token{kind: tokFunc, pos: start, end: lx.pos, text: f}, nil
					}
				}
			}
			return tok(tokWord, n)
		}
	}
	// A lone '=', '&' or '|', or a character that starts no token.
	_, n := utf8.DecodeRuneInString(src[start:])
	return tok(tokBad, n)
}

// keyLen is the length of the run of key characters at the start of s.
func keyLen(s string) int {
	n := 0
	for n < len(s) && isKeyChar(s[n]) {
		n++
	}
	return n
}

// Operators written as words, in the order Calico's tokenizer tries them.
// A multi-word operator may have any spaces or tabs between its words,
// including none ("notin", "startswith", "endswith"); the last word must
// end at a word boundary (a character that cannot be in a key, or the
// end of the selector).
var wordOperators = [...]struct {
	words []string
	op    op
}{
	{[]string{"contains"}, opContains},
	{[]string{"starts", "with"}, opStartsWith},
	{[]string{"ends", "with"}, opEndsWith},
	{[]string{"not", "in"}, opNotIn},
	{[]string{"in"}, opIn},
}

// nextOperator reads the operator after a label. It returns the token for
// "==" and "!=" and for anything that is not a word; for a word operator
// it returns a tokWord whose text is the operator as written and reports
// its op. A word that is no operator is returned as a tokWord with op
// opAll (the zero op).
func (lx *lexer) nextOperator() (token, op, error) {
	lx.skipSpace()
	start := lx.pos
	if start == len(lx.src) || !isKeyChar(lx.src[start]) {
		t, err := lx.next()
		return t, opAll, err
	}
	for _, wo := range wordOperators {
		if end, ok := matchWords(lx.src, start, wo.words); ok {
			lx.pos = end
			return token{kind: tokWord, pos: start, end: end, text: lx.src[start:end]}, wo.op, nil
		}
	}
	t, err := lx.next()
	return t, opAll, err
}

// matchWords reports whether src at pos spells words, with optional spaces
// or tabs between them and a word boundary after the last, and where the
// match ends.
func matchWords(src string, pos int, words []string) (int, bool) {
	for i, w := range words {
		if i > 0 {
			for pos < len(src) && isSpace(src[pos]) {
				pos++
			}
		}
		if !strings.HasPrefix(src[pos:], w) {
			return 0, false
		}
		pos += len(w)
	}
	if pos < len(src) && isKeyChar(src[pos]) {
		return 0, false
	}
	return pos, true
}

// describe says what a token is, for "found ..." in error messages.
func (t token) describe(src string) string {
	switch t.kind {
	case tokEOF:
		return "end of selector"
	case tokWord:
		return fmt.Sprintf("%q", t.text)
	case tokFunc:
		return fmt.Sprintf("%q", t.text+"(")
	case tokString:
		return "string " + src[t.pos:t.end]
	case tokBad:
		if r, _ := utf8.DecodeRuneInString(t.text); r != utf8.RuneError {
			return fmt.Sprintf("%q", r)
		}
		return fmt.Sprintf("byte 0x%02x", t.text[0])
	default:
		return "'" + t.text + "'"
	}
}
