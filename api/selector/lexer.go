package selector

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tokEOF    tokKind = iota
	tokWord           // a label key or keyword: a run of key characters
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

type token struct {
	kind tokKind
	pos  int    // byte offset of the first character
	end  int    // byte offset just past the token
	text string // word, string value, or the bad character
}

// lexer splits a selector into tokens on demand.
type lexer struct {
	src string
	pos int
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// isKeyChar reports whether c may appear in a label key: the characters of
// a Kubernetes qualified name, as in Calico's tokenizer.
func isKeyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '/'
}

// next returns the next token. The only error is an unterminated string.
func (lx *lexer) next() (token, error) {
	src := lx.src
	for lx.pos < len(src) && isSpace(src[lx.pos]) {
		lx.pos++
	}
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
			n := 1
			for start+n < len(src) && isKeyChar(src[start+n]) {
				n++
			}
			return tok(tokWord, n)
		}
	}
	// A lone '=', '&' or '|', or a character that starts no token.
	_, n := utf8.DecodeRuneInString(src[start:])
	return tok(tokBad, n)
}

// describe says what a token is, for "found ..." in error messages.
func (t token) describe(src string) string {
	switch t.kind {
	case tokEOF:
		return "end of selector"
	case tokWord:
		return fmt.Sprintf("%q", t.text)
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
