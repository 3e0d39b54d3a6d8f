package selector

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		wantPos int
		wantMsg string
	}{
		// Unterminated quotes.
		{`a == 'x`, 5, `unterminated string: no closing '`},
		{`a == "x`, 5, `unterminated string: no closing "`},
		{`a in {'x', "y}`, 11, `unterminated string: no closing "`},
		// Missing operands.
		{`a == `, 5, `expected a quoted string`},
		{`a`, 1, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a"`},
		{`== 'x'`, 0, `expected a label, '!', '(', has(), all() or global(), found '=='`},
		{`a starts 'x'`, 9, `expected 'with' after 'starts', found string 'x'`},
		{`a ends`, 6, `expected 'with' after 'ends'`},
		{`a not {'x'}`, 6, `expected 'in' after 'not', found '{'`},
		{`a contains x`, 11, `expected a quoted string, found "x"`},
		{`!`, 1, `expected a label, '!', '(', has(), all() or global()`},
		// Unbalanced parentheses.
		{`(a == 'x'`, 9, `expected '&&', '||' or ')' to close '(' at position 0`},
		{`((a == 'x') || b == 'y'`, 23, `expected '&&', '||' or ')' to close '(' at position 0`},
		{`a == 'x')`, 8, `expected '&&', '||' or end of selector, found ')'`},
		{`()`, 1, `expected a label, '!', '(', has(), all() or global(), found ')'`},
		// Trailing garbage.
		{`a == 'x' b == 'y'`, 9, `expected '&&', '||' or end of selector, found "b"`},
		{`has(a) 'x'`, 7, `expected '&&', '||' or end of selector, found string 'x'`},
		{`all() all()`, 6, `expected '&&', '||' or end of selector, found "all("`},
		// == with an unquoted value.
		{`a == x`, 5, `expected a quoted string, found "x"`},
		{`a == 1`, 5, `expected a quoted string, found "1"`},
		{`a = 'x'`, 2, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a", found '='`},
		// Bad key characters.
		{`a$b == 'x'`, 1, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a", found '$'`},
		{`app:x == 'y'`, 3, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "app", found ':'`},
		{`*a == 'x'`, 0, `expected a label, '!', '(', has(), all() or global(), found '*'`},
		{`ä == 'x'`, 0, `expected a label, '!', '(', has(), all() or global(), found 'ä'`},
		{"a\xff == 'x'", 1, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a", found byte 0xff`},
		{`has(a:b)`, 5, `expected ')' to close has(, found ':'`},
		// has() and friends.
		{`has()`, 4, `expected a label in has(), found ')'`},
		{`has('a')`, 4, `expected a label in has(), found string 'a'`},
		{`has(a`, 5, `expected ')' to close has(`},
		{`all(a)`, 4, `expected ')' to close all(, found "a"`},
		{`global(`, 7, `expected ')' to close global(`},
		// in without braces, and bad sets.
		{`a in 'x'`, 5, `expected '{' to start a set, found string 'x'`},
		{`a not in ('x')`, 9, `expected '{' to start a set, found '('`},
		{`a in {'x' 'y'}`, 10, `expected ',' or '}', found string 'y'`},
		{`a in {,}`, 6, `expected a quoted string or '}', found ','`},
		{`a in {'x',,}`, 10, `expected a quoted string or '}', found ','`},
		{`a in {'x'`, 9, `expected ',' or '}'`},
		{`a in {x}`, 6, `expected a quoted string or '}', found "x"`},
		// Dangling and malformed boolean operators.
		{`a == 'x' &&`, 11, `expected a label, '!', '(', has(), all() or global()`},
		{`a == 'x' || `, 12, `expected a label, '!', '(', has(), all() or global()`},
		{`&& a == 'x'`, 0, `expected a label, '!', '(', has(), all() or global(), found '&&'`},
		{`a == 'x' && || b == 'y'`, 12, `expected a label, '!', '(', has(), all() or global(), found '||'`},
		{`a == 'x' & b == 'y'`, 9, `expected '&&', '||' or end of selector, found '&'`},
		{`a == 'x' | b == 'y'`, 9, `expected '&&', '||' or end of selector, found '|'`},
		// Word operators must end at a word boundary; the words of
		// two-word operators may be joined but not misspelt.
		{`a notinx {'x'}`, 2, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a", found "notinx"`},
		{`a containsx 'x'`, 2, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a", found "containsx"`},
		{`a ends withs 'x'`, 7, `expected 'with' after 'ends', found "withs"`},
		{`a inf {'x'}`, 2, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "a", found "inf"`},
		// No space between a function name and its "(".
		{`has (a)`, 4, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "has", found '('`},
		{`all ()`, 4, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "all", found '('`},
		{"global\t()", 7, `expected an operator (==, !=, in, not in, contains, starts with, ends with) after label "global", found '('`},
		// Only spaces and tabs are whitespace.
		{"a ==\n'x'", 4, `expected a quoted string, found '\n'`},
		{"a == 'x'\r\n", 8, `expected '&&', '||' or end of selector, found '\r'`},
		{"\n", 0, `expected a label, '!', '(', has(), all() or global(), found '\n'`},
		{"has(\va)", 4, `expected a label in has(), found '\v'`},
		// Label keys are at most 512 characters.
		{strings.Repeat("k", 513) + ` == 'x'`, 0, `label is 513 characters long, longer than the maximum 512`},
		{`has(` + strings.Repeat("k", 513) + `)`, 4, `label is 513 characters long, longer than the maximum 512`},
		// Nesting limit.
		{strings.Repeat("(", maxDepth+1) + "all()" + strings.Repeat(")", maxDepth+1), maxDepth, `parentheses nested more than 100 deep`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			sel, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse succeeded with %s, want an error", sel)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is a %T, want *ParseError", err, err)
			}
			if pe.Pos != tc.wantPos || pe.Msg != tc.wantMsg || pe.Selector != tc.in {
				t.Errorf("got  pos %d: %s\nwant pos %d: %s", pe.Pos, pe.Msg, tc.wantPos, tc.wantMsg)
			}
		})
	}
}

func TestParseErrorString(t *testing.T) {
	_, err := Parse("a == ")
	want := `selector "a == ": at position 5: expected a quoted string`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}
