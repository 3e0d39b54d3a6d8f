package selector

import "testing"

// TestPrefixLabels uses the cases of Calico's PrefixVisitor tests
// (libcalico-go/lib/selector/parser/parser_test.go, "Visitor tests").
func TestPrefixLabels(t *testing.T) {
	tests := []struct{ in, want string }{
		{`k == 'v'`, `visited/k == "v"`},
		{`k != 'v'`, `visited/k != "v"`},
		{`k contains 'v'`, `visited/k contains "v"`},
		{`k starts with 'v'`, `visited/k starts with "v"`},
		{`k ends with 'v'`, `visited/k ends with "v"`},
		{`k == 'v' && x == 'y'`, `(visited/k == "v" && visited/x == "y")`},
		{`k == 'v' || has(x)`, `(visited/k == "v" || has(visited/x))`},
		{`!(k == 'v')`, `!visited/k == "v"`},
		{`k in {'v'}`, `visited/k in {"v"}`},
		{`k not in {'v'}`, `visited/k not in {"v"}`},
		{`!(!(k == 'v' && has(t) || all()) && (a in {'b', 'c'}))`,
			`!(!((visited/k == "v" && has(visited/t)) || all()) && visited/a in {"b", "c"})`},
		{`global()`, `global()`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			orig := MustParse(tc.in)
			before := orig.String()
			got := orig.PrefixLabels("visited/")
			if got.String() != tc.want {
				t.Errorf("PrefixLabels = %s, want %s", got, tc.want)
			}
			if got.UniqueID() != MustParse(tc.want).UniqueID() {
				t.Errorf("UniqueID %s differs from that of parsing %s", got.UniqueID(), tc.want)
			}
			if orig.String() != before {
				t.Errorf("PrefixLabels changed the original: %s, was %s", orig, before)
			}
			labels := map[string]string{"visited/k": "v", "visited/t": "", "visited/a": "b"}
			plain := map[string]string{"k": "v", "t": "", "a": "b"}
			if got.Evaluate(labels) != orig.Evaluate(plain) {
				t.Errorf("prefixed selector disagrees with the original on prefixed labels")
			}
		})
	}
}
