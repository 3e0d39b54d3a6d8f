package selector

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestString(t *testing.T) {
	// Canonical forms as Calico's parser prints them (its
	// collectFragments): && and || always in parentheses, grouping kept,
	// "!" directly before its operand.
	tests := []struct {
		in, want string
	}{
		{``, `all()`},
		{" \t ", `all()`},
		{`all()`, `all()`},
		{`all( )`, `all()`},
		{"all(\t)", `all()`},
		{`global()`, `global()`},
		{`a=='x'`, `a == "x"`},
		{`a!="x"`, `a != "x"`},
		{`a   contains    'x'`, `a contains "x"`},
		{"a\tstarts \t with 'x'", `a starts with "x"`},
		{`a ends with 'x'`, `a ends with "x"`},
		{`a in{'b','a','b'}`, `a in {"a", "b"}`},
		{`a not in {'b',}`, `a not in {"b"}`},
		{`a in {}`, `a in {}`},
		{`has( a )`, `has(a)`},
		{"has(\ta\t)", `has(a)`},
		{`! has(a)`, `!has(a)`},
		{`!all()`, `!all()`},
		{`!global()`, `!global()`},
		{`!a == 'x'`, `!a == "x"`},
		{`!(a == 'x')`, `!a == "x"`},
		{`!(a in {'x'})`, `!a in {"x"}`},
		{`!!has(a)`, `has(a)`},
		{`!!!has(a)`, `!has(a)`},
		{`a == 'it"s'`, `a == 'it"s'`},
		{`a == "it's"`, `a == "it's"`},
		{`a in {'say "hi"', "it's"}`, `a in {"it's", 'say "hi"'}`},
		{`a == 'x y'`, `a == "x y"`},
		{`a == 'x' || b == 'y' && c == 'z'`, `(a == "x" || (b == "y" && c == "z"))`},
		{`(a == 'x' || b == 'y') && c == 'z'`, `((a == "x" || b == "y") && c == "z")`},
		{`a == 'x' || (b == 'y' && c == 'z')`, `(a == "x" || (b == "y" && c == "z"))`},
		{`((a == 'x'))`, `a == "x"`},
		{`a == 'x' && b == 'y' && c == 'z'`, `(a == "x" && b == "y" && c == "z")`},
		{`(a == 'x' && b == 'y') && c == 'z'`, `((a == "x" && b == "y") && c == "z")`},
		{`a == 'x' && (b == 'y' && c == 'z')`, `(a == "x" && (b == "y" && c == "z"))`},
		{`a == 'x' || (b == 'y' || c == 'z')`, `(a == "x" || (b == "y" || c == "z"))`},
		{`((a == 'x' && b == 'y'))`, `(a == "x" && b == "y")`},
		{`!(a == 'x' && b == 'y')`, `!(a == "x" && b == "y")`},
		{`!(a == 'x' || b == 'y') && c == 'z'`, `(!(a == "x" || b == "y") && c == "z")`},
		{`!(!(a == 'x') && b == 'y')`, `!(!a == "x" && b == "y")`},
		{`b == 'y' && a == 'x'`, `(b == "y" && a == "x")`}, // operand order kept
		// From Calico's parser_test.go canonicalisationTests.
		{`! (has( b)||! has(a ))`, `!(has(b) || !has(a))`},
		{`! (a == "b"&&! c != "d")`, `!(a == "b" && !c != "d")`},
		{`a startswith '"'`, `a starts with '"'`},
		{`a endswith "'"`, `a ends with "'"`},
		{`a in {"z", "z", "x", "y", "x", "a"}`, `a in {"a", "x", "y", "z"}`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := MustParse(tc.in).String()
			if got != tc.want {
				t.Errorf("String() = %s, want %s", got, tc.want)
			}
			if again := MustParse(got).String(); again != got {
				t.Errorf("String() of canonical form = %s, want it unchanged", again)
			}
		})
	}
}

// TestStringDoubleNegationAcrossParens pins Calico's one non-idempotent
// canonical form: a "!" outside parentheses and one inside stay two
// nodes and print as "!!", which parses back as no negation at all.
func TestStringDoubleNegationAcrossParens(t *testing.T) {
	tests := []struct{ in, want, reparsed string }{
		{`!(!has(a))`, `!!has(a)`, `has(a)`},
		{`!(!a == 'x')`, `!!a == "x"`, `a == "x"`},
		{`!(!(a == 'x' && b == 'y'))`, `!!(a == "x" && b == "y")`, `(a == "x" && b == "y")`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			sel := MustParse(tc.in)
			if got := sel.String(); got != tc.want {
				t.Errorf("String() = %s, want %s", got, tc.want)
			}
			again := MustParse(sel.String())
			if got := again.String(); got != tc.reparsed {
				t.Errorf("String() of re-parsed canonical form = %s, want %s", got, tc.reparsed)
			}
			if sel.UniqueID() == again.UniqueID() {
				t.Errorf("%s and %s share ID %s; Calico gives them different IDs", sel, again, sel.UniqueID())
			}
		})
	}
}

func TestCanonicalEquivalents(t *testing.T) {
	groups := [][]string{
		{``, ` `, "\t", `all()`, `all( )`, `(all())`, `!!all()`},
		{`a == 'x'`, `a=="x"`, `(a == "x")`, ` ( ( a  ==  'x' ) ) `, `!!a == 'x'`, `!!(a == 'x')`},
		{`a in {'x', 'y'}`, `a in {"y","x"}`, `a in {'y', 'x', 'y',}`, `(a in {'x','x','y'})`},
		{`a not in {}`, `a not  in{ }`, `(a not in {})`, `a notin {}`, "a not\tin {}"},
		{`a starts with 'x'`, `a startswith 'x'`, `a starts  with"x"`},
		{`a ends with 'x'`, `a endswith 'x'`, "a ends\twith 'x'"},
		{`!has(a)`, `! has(a)`, `!(has(a))`, `!!!has( a )`},
		{`!(a == 'x')`, `!a == 'x'`, `!!!a == 'x'`},
		{`a == 'x' && b == 'y' && c == 'z'`, `(a == 'x' && b == 'y' && c == 'z')`, `((a == 'x') && (b == 'y') && c == 'z')`},
		{`a == 'x' || b == 'y' && c == 'z'`, `a == 'x' || (b == 'y' && c == 'z')`, `(a == 'x') || ((b == 'y') && (c == 'z'))`},
		{`a == 'it"s'`, `a=='it"s'`},
		{`global() && x starts with 'a'`, `(global()) && x starts with "a"`},
	}
	for _, g := range groups {
		t.Run(g[0], func(t *testing.T) {
			first := MustParse(g[0])
			for _, in := range g[1:] {
				s := MustParse(in)
				if s.String() != first.String() || s.UniqueID() != first.UniqueID() {
					t.Errorf("%q -> %s %s; want %s %s as for %q",
						in, s, s.UniqueID(), first, first.UniqueID(), g[0])
				}
			}
		})
	}
}

func TestUniqueIDsDiffer(t *testing.T) {
	// Selectors that look alike but mean different things, or are only
	// equivalent by semantics rather than by Calico's construction.
	sels := []string{
		`all()`, `global()`, `!global()`, `!all()`,
		`a == 'x'`, `a != 'x'`, `!(a == 'x')`, `a == 'X'`, `A == 'x'`, `a == 'x '`, `a == ''`,
		`a in {'x'}`, `a not in {'x'}`, `a in {}`, `a not in {}`, `a in {'x', 'y'}`, `a in {'x,y'}`,
		`has(a)`, `!has(a)`, `has(b)`, `!(!has(a))`,
		`a contains 'x'`, `a starts with 'x'`, `a ends with 'x'`,
		`a == 'x' && b == 'y'`, `b == 'y' && a == 'x'`, `a == 'x' || b == 'y'`,
		`a == 'x' || b == 'y' && c == 'z'`, `(a == 'x' || b == 'y') && c == 'z'`,
		`a == 'x' && b == 'y' && c == 'z'`, `(a == 'x' && b == 'y') && c == 'z'`, `a == 'x' && (b == 'y' && c == 'z')`,
		`a == 'x"'`, `a == "x'"`,
	}
	seen := map[string]string{}
	for _, in := range sels {
		s := MustParse(in)
		if prev, ok := seen[s.UniqueID()]; ok {
			t.Errorf("%q and %q share ID %s", in, prev, s.UniqueID())
		}
		seen[s.UniqueID()] = in
	}
}

func TestUniqueIDFormat(t *testing.T) {
	// "s:" + 38 characters: 28 bytes of SHA-224 in unpadded base64url.
	format := regexp.MustCompile(`^s:[A-Za-z0-9_-]{38}$`)
	for _, in := range []string{``, `a == 'x'`, `a in {'a', 'b', 'c'} && !has(d) || e contains 'f'`} {
		t.Run(in, func(t *testing.T) {
			id := MustParse(in).UniqueID()
			if !format.MatchString(id) {
				t.Errorf("UniqueID() = %q, want it to match %s", id, format)
			}
		})
	}
	var zero Selector
	if got, want := zero.UniqueID(), MustParse(`all()`).UniqueID(); got != want {
		t.Errorf("zero Selector UniqueID() = %s, want %s as for all()", got, want)
	}
}

func TestParseTree(t *testing.T) {
	tests := []struct {
		in   string
		want node
	}{
		{``, node{op: opAll}},
		{`a in {'y', 'x', 'y'}`, node{op: opIn, key: "a", set: []string{"x", "y"}}},
		{`(has(a) && has(b)) && (has(c) || has(d))`, node{op: opAnd, kids: []node{
			{op: opAnd, kids: []node{{op: opHas, key: "a"}, {op: opHas, key: "b"}}},
			{op: opOr, kids: []node{{op: opHas, key: "c"}, {op: opHas, key: "d"}}},
		}}},
		{`has(a) && has(b) && has(c)`, node{op: opAnd, kids: []node{
			{op: opHas, key: "a"}, {op: opHas, key: "b"}, {op: opHas, key: "c"},
		}}},
		{`!!!(a == 'x')`, node{op: opNot, kids: []node{{op: opEq, key: "a", value: "x"}}}},
		{`!!(a == 'x')`, node{op: opEq, key: "a", value: "x"}},
		{`!(!has(a))`, node{op: opNot, kids: []node{{op: opNot, kids: []node{{op: opHas, key: "a"}}}}}},
		{`((has(a)))`, node{op: opHas, key: "a"}},
		{`a == 'x' || b == 'y' && c == 'z'`, node{op: opOr, kids: []node{
			{op: opEq, key: "a", value: "x"},
			{op: opAnd, kids: []node{
				{op: opEq, key: "b", value: "y"},
				{op: opEq, key: "c", value: "z"},
			}},
		}}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parse(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(node{})); diff != "" {
				t.Errorf("parse tree (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse of a bad selector did not panic")
		}
	}()
	MustParse("a ==")
}
