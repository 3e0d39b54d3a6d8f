package selector

import (
	"strings"
	"testing"
)

// TestCalicoUniqueIDs pins IDs to Calico's. Calico's ID is
// hash.MakeUniqueID("s", canonical) in libcalico-go/lib/hash/unique_id.go:
// "s:" + base64.RawURLEncoding(SHA-224("s:" + canonical)). The first three
// IDs are listed in Calico's libcalico-go/lib/selector/parser/parser_test.go
// (canonicalisationTests); the others were computed outside Go, with
// Python's hashlib.sha224 and base64.urlsafe_b64encode (padding stripped),
// over the canonical strings written here by hand from Calico's printing
// rules.
func TestCalicoUniqueIDs(t *testing.T) {
	tests := []struct {
		in, canonical, id string
	}{
		// From Calico's parser_test.go.
		{``, `all()`, `s:5y5I3VdRZfDU01O--xXAPx2yxCQQqMf0M6IWug`},
		{` (all() )`, `all()`, `s:5y5I3VdRZfDU01O--xXAPx2yxCQQqMf0M6IWug`},
		{`! (has( b)||! has(a ))`, `!(has(b) || !has(a))`, `s:Iss0uCleLYv1GSv_pNm7hAO58kE9jAx1NKyG3Q`},
		{`! (a == "b"&&! c != "d")`, `!(a == "b" && !c != "d")`, `s:lh3haoY1ikTRkd4UZu0nWSaIBknYLPJLX16d-w`},
		// Computed with Python's hashlib.
		{`(a == 'x' && b == 'y') && c == 'z'`, `((a == "x" && b == "y") && c == "z")`, `s:Tykfr7VKoqjKTik18GazfSvbV0hFYipfhVpyAA`},
		{`a == 'x' && (b == 'y' && c == 'z')`, `(a == "x" && (b == "y" && c == "z"))`, `s:6-ndjEmJ7PCyyuwkA0onv0KdSOBU7s7R7etvCA`},
		{`a == 'x' && b == 'y' && c == 'z'`, `(a == "x" && b == "y" && c == "z")`, `s:1lM902zFCdFNFChXj9n7op_jxWHbNdG8FB6h_w`},
		{`!(!has(a))`, `!!has(a)`, `s:VZFYmDV_Drir7seXQB5vQXF8-34s2nf1b8ItRA`},
		{`!!has(a)`, `has(a)`, `s:JpRGrxZ4kdS6g7WoF-uG_g7qlh2ipw2zGYBMpQ`},
		{`!(a == 'x')`, `!a == "x"`, `s:1yIc14GDFvQydvTbs_tHov9u78u4uTbHUxmaCQ`},
		{`a notin {'y', 'x'}`, `a not in {"x", "y"}`, `s:axfCXLSD6bbmHMB1XroxeFIorOEyxrdXSPIs7A`},
		{`a startswith 'x' || b endswith "y"`, `(a starts with "x" || b ends with "y")`, `s:S7nZHf0kMu71c0IpAt20S91lecFTNeFajVulnA`},
		{`projectcalico.org/namespace == 'prod' && app in {'web', 'api'}`,
			`(projectcalico.org/namespace == "prod" && app in {"api", "web"})`, `s:Edkcr3gZ4ZCI-L5IvPKUsZmeq_9g4zHVsf5GaQ`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			sel := MustParse(tc.in)
			if got := sel.String(); got != tc.canonical {
				t.Errorf("String() = %s, want %s", got, tc.canonical)
			}
			if got := sel.UniqueID(); got != tc.id {
				t.Errorf("UniqueID() = %s, want Calico's %s", got, tc.id)
			}
		})
	}
}

// TestCalicoAccepts lists selectors Calico's tokenizer and parser accept
// that a stricter reading of the grammar might not.
func TestCalicoAccepts(t *testing.T) {
	tests := []struct{ in, want string }{
		// One-word forms of the two-word operators (Calico matches the
		// words with optional spaces or tabs between them).
		{`a notin {'x'}`, `a not in {"x"}`},
		{`a startswith 'x'`, `a starts with "x"`},
		{`a endswith 'x'`, `a ends with "x"`},
		{"a not \t in {'x'}", `a not in {"x"}`},
		{`a notin"x"`, ""}, // tokenizes; rejected below by the parser (no set)
		// Operators need a word boundary only after them.
		{`a contains"x"`, `a contains "x"`},
		{`a in{'x'}`, `a in {"x"}`},
		{`a startswith"x"`, `a starts with "x"`},
		// Operator words are labels where a label is expected.
		{`contains contains 'contains'`, `contains contains "contains"`},
		{`notin notin {}`, `notin not in {}`},
		{`startswith starts with 'x'`, `startswith starts with "x"`},
		{`has == 'x' && all in {} && global != ''`, `(has == "x" && all in {} && global != "")`},
		// Space and tab inside a function's parentheses.
		{"has(\t a \t)", `has(a)`},
		{`global( )`, `global()`},
		// A newline inside a quoted value is part of the value.
		{"a == 'x\ny'", "a == \"x\ny\""},
		// Keys of up to 512 characters.
		{strings.Repeat("k", 512) + ` == 'x'`, strings.Repeat("k", 512) + ` == "x"`},
		{`has(` + strings.Repeat("k", 512) + `)`, `has(` + strings.Repeat("k", 512) + `)`},
	}
	for _, tc := range tests {
		t.Run(tc.in[:min(len(tc.in), 40)], func(t *testing.T) {
			sel, err := Parse(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("Parse succeeded with %s, want an error", sel)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := sel.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCalicoRejects lists selectors Calico refuses that a more lenient
// parser would take. The exact messages are in TestParseErrors.
func TestCalicoRejects(t *testing.T) {
	long := strings.Repeat("k", MaxLabelLength+1)
	for _, in := range []string{
		// Whitespace between a function name and its "(".
		`has (a)`, `all ()`, `global ()`, `!has (a)`, `a == 'x' && has (b)`, "has\t(a)",
		// Whitespace other than space and tab, anywhere between tokens.
		"\n", "\r\n", " \t\r\n", "a == 'x'\n", "a ==\n'x'", "a == 'x'\r\n&& b == 'y'",
		"a\v== 'x'", "a\f== 'x'", "has(\na)", "a in {'x',\n'y'}", "a not\nin {'x'}", "a starts\nwith 'x'",
		// Keys over 512 characters, wherever a key appears.
		long + ` == 'x'`, `has(` + long + `)`, `a == 'x' || !` + long + ` in {}`,
		// Misspelt or run-on operator words.
		`a ends withs 'x'`, `a inf {'x'}`, `a notinx {}`, `a startswithx 'x'`, `a starts foo 'x'`,
	} {
		t.Run(in[:min(len(in), 40)], func(t *testing.T) {
			if sel, err := Parse(in); err == nil {
				t.Errorf("Parse(%q) = %s, want an error as Calico gives", in, sel)
			}
		})
	}
}
