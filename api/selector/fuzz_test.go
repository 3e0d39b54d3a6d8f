package selector

import (
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	seeds := []string{
		``, ` `, `all()`, `global()`, `!global()`, `has(a)`, `!has(a)`,
		`a == 'x'`, `a != "x"`, `a in {}`, `a not in {}`, `a in {'x', "y", 'x',}`,
		`a contains 'x'`, `a starts with 'x'`, `a ends with ''`,
		`a == 'x' || b == 'y' && c == 'z'`, `(a == 'x' || b == 'y') && c == 'z'`,
		`!(a == 'x' && !(b in {'y'}))`, `!!!has(a)`, `((((all()))))`,
		`a == 'it"s' || b == "it's"`, `a in {'say "hi"', "it's"}`,
		`projectcalico.org/namespace == 'prod' && calico/k8s_ns not in {'kube-system'}`,
		`has == 'x' && in in {'y'} && not != 'z' && all == ''`,
		"a\t==\t'x'  &&\thas( b )", "a\t==\n'x'\r&&\vhas( b )",
		`!(!has(a))`, `(a == 'x' && b == 'y') && c == 'z'`, `a notin {'x'} || b startswith 'y' && c endswith 'z'`,
		`has (a)`, `all ()`, strings.Repeat("k", 513) + ` == 'x'`,
		// Invalid.
		`a == 'x`, `a == `, `(a == 'x'`, `a == 'x')`, `a == 'x' b`, `a == x`, `a$ == 'x'`,
		`has()`, `a in 'x'`, `a == 'x' &&`, `a = 'x'`, `a notinx {}`, `a in {,}`, "a\xff", `ä`,
		strings.Repeat("(", 120) + "all()" + strings.Repeat(")", 120),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sel, err := Parse(in)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %v is a %T, want *ParseError", err, err)
			}
			return
		}
		canon := sel.String()
		again, err := Parse(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, in, err)
		}
		if again.String() != canon {
			// Calico's one unstable form: "!" outside parentheses
			// over "!" inside prints as "!!", which re-parses as no
			// negation. One more round must then be stable.
			if !strings.Contains(canon, "!!") {
				t.Fatalf("canonical form of %q is not stable: %q -> %q", in, canon, again.String())
			}
			third := MustParse(again.String())
			if third.String() != again.String() || third.UniqueID() != again.UniqueID() {
				t.Fatalf("canonical form of %q is not stable after two rounds: %q -> %q -> %q",
					in, canon, again.String(), third.String())
			}
		} else if again.UniqueID() != sel.UniqueID() {
			t.Fatalf("UniqueID changed on re-parse of %q", canon)
		}
		for _, labels := range labelSetsFor(sel) {
			if a, b := sel.Evaluate(labels), again.Evaluate(labels); a != b {
				t.Fatalf("%q and its canonical form %q disagree on %v: %v vs %v", in, canon, labels, a, b)
			}
		}
	})
}

// labelSetsFor builds label maps that exercise sel: none, each key set to
// each value found in the selector (rotated so keys get different values),
// values that differ from those, and half the keys present.
func labelSetsFor(sel *Selector) []map[string]string {
	keys := []string{NamespaceLabel}
	values := []string{""}
	var walk func(n *node)
	walk = func(n *node) {
		if n.key != "" {
			keys = append(keys, n.key)
		}
		values = append(values, n.value)
		values = append(values, n.set...)
		for i := range n.kids {
			walk(&n.kids[i])
		}
	}
	walk(&sel.root)
	// Bound the work for large inputs: len(values) maps of len(keys) labels.
	keys = keys[:min(len(keys), 16)]
	values = values[:min(len(values), 16)]

	sets := []map[string]string{nil, {}}
	for shift := range values {
		m := map[string]string{}
		for i, k := range keys {
			m[k] = values[(i+shift)%len(values)]
		}
		sets = append(sets, m)
	}
	for _, v := range values {
		m := map[string]string{}
		for i, k := range keys {
			if i%2 == 1 {
				m[k] = v + "x"
			}
		}
		sets = append(sets, m)
	}
	return sets
}
