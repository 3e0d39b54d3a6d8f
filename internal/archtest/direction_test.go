package archtest

import (
	"strconv"
	"strings"
	"testing"
)

// TestDependencyDirection checks the arrows of ../shared/STYLE.md that
// cross top-level folders: api/ (resource types, the selector language)
// imports nothing of ours outside api/; lib/ (helpers shared by the
// components' wiring) imports nothing of ours at all; internal/ (the
// test harness, which itself imports the components) is imported only
// by tests and by the harness tools (internal/, hack/, lab/, test/).
func TestDependencyDirection(t *testing.T) {
	for _, f := range moduleFiles(t) {
		for _, spec := range f.ast.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			if msg := wrongArrow(f.path, f.test, p); msg != "" {
				t.Errorf("%s imports %s: %s", f.path, p, msg)
			}
		}
	}
}

// wrongArrow says what is wrong with the file at path (relative to the
// module root) importing imp, or "".
func wrongArrow(path string, test bool, imp string) string {
	if !strings.HasPrefix(imp, module+"/") {
		return ""
	}
	target := strings.TrimPrefix(imp, module+"/")
	top := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	switch from := top(path); {
	case from == "api" && top(target) != "api" && !test:
		return "api/ imports nothing of ours outside api/"
	case from == "lib" && !test:
		return "lib/ imports nothing of ours"
	case top(target) == "internal" && !test && !harness[from]:
		return "internal/ is the test harness: the components never import it (shared wiring helpers live in lib/)"
	}
	return ""
}

// harness are the top-level folders that may import internal/.
var harness = map[string]bool{"internal": true, "hack": true, "lab": true, "test": true}

// TestWrongArrow: the rules catch what they must.
func TestWrongArrow(t *testing.T) {
	for _, c := range []struct {
		path, imp string
		test      bool
		bad       bool
	}{
		{"felix/agent/agent.go", module + "/internal/pprofmux", false, true},
		{"felix/agent/agent.go", module + "/lib/pprofmux", false, false},
		{"felix/e2e/x_test.go", module + "/internal/multinode", true, false},
		{"hack/demo/main.go", module + "/internal/netnstest", false, false},
		{"api/v3/node.go", module + "/api/numorstring", false, false},
		{"api/v3/node.go", module + "/datastore", false, true},
		{"lib/pprofmux/pprofmux.go", module + "/api/v3", false, true},
		{"lib/pprofmux/pprofmux.go", "net/http/pprof", false, false},
	} {
		if got := wrongArrow(c.path, c.test, c.imp) != ""; got != c.bad {
			t.Errorf("%s -> %s (test %v): wrong %v, want %v", c.path, c.imp, c.test, got, c.bad)
		}
	}
}
