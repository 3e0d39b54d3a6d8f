package selector

import (
	"fmt"
	"testing"
)

type evalCase struct {
	sel    string
	labels map[string]string
	want   bool
}

var (
	none = map[string]string{}
	webA = map[string]string{"app": "web", "tier": "a"}
)

var evalCases = []evalCase{
	// ==: false when absent.
	{`app == 'web'`, webA, true},
	{`app == 'db'`, webA, false},
	{`app == ''`, map[string]string{"app": ""}, true},
	{`app == ''`, none, false},
	{`app == 'web'`, none, false},
	{`app == 'web'`, nil, false},

	// !=: true when absent.
	{`app != 'web'`, webA, false},
	{`app != 'db'`, webA, true},
	{`app != 'db'`, none, true},
	{`app != ''`, none, true},

	// in: false when absent; {} matches nothing.
	{`app in {'db', 'web'}`, webA, true},
	{`app in {'db', 'cache'}`, webA, false},
	{`app in {'db', 'web'}`, none, false},
	{`app in {}`, webA, false},
	{`app in {}`, none, false},
	{`app in {'a','b','c','d','e','f','g','h','i','j','web'}`, webA, true}, // binary search path
	{`app in {'a','b','c','d','e','f','g','h','i','j','k'}`, webA, false},

	// not in: true when absent; {} matches everything.
	{`app not in {'db', 'web'}`, webA, false},
	{`app not in {'db'}`, webA, true},
	{`app not in {'db'}`, none, true},
	{`app not in {}`, webA, true},
	{`app not in {}`, none, true},

	// has.
	{`has(app)`, webA, true},
	{`has(app)`, none, false},
	{`has(app)`, map[string]string{"app": ""}, true},
	{`!has(app)`, webA, false},
	{`!has(app)`, none, true},

	// contains, starts with, ends with: false when absent.
	{`app contains 'e'`, webA, true},
	{`app contains 'x'`, webA, false},
	{`app contains ''`, webA, true},
	{`app contains ''`, none, false},
	{`app contains 'e'`, none, false},
	{`app starts with 'we'`, webA, true},
	{`app starts with 'eb'`, webA, false},
	{`app starts with 'we'`, none, false},
	{`app ends with 'eb'`, webA, true},
	{`app ends with 'we'`, webA, false},
	{`app ends with 'eb'`, none, false},

	// all(), the empty selector, global().
	{`all()`, webA, true},
	{`all()`, nil, true},
	{``, webA, true},
	{"  \t ", nil, true},
	{`!all()`, webA, false},
	{`global()`, webA, true},
	{`global()`, nil, true},
	{`global()`, map[string]string{NamespaceLabel: "default"}, false},
	{`!global()`, map[string]string{NamespaceLabel: "default"}, true},
	{`global() && app == 'web'`, webA, true},

	// && and ||.
	{`app == 'web' && tier == 'a'`, webA, true},
	{`app == 'web' && tier == 'b'`, webA, false},
	{`app == 'x' || tier == 'a'`, webA, true},
	{`app == 'x' || tier == 'b'`, webA, false},

	// Precedence: && binds tighter than ||.
	{`a == 'x' || b == 'y' && c == 'z'`, map[string]string{"a": "x"}, true},
	{`(a == 'x' || b == 'y') && c == 'z'`, map[string]string{"a": "x"}, false},
	{`a == 'x' || b == 'y' && c == 'z'`, map[string]string{"b": "y"}, false},
	{`a == 'x' || b == 'y' && c == 'z'`, map[string]string{"b": "y", "c": "z"}, true},
	{`b == 'y' && c == 'z' || a == 'x'`, map[string]string{"a": "x"}, true},
	// ! binds tighter than && and ||.
	{`!has(a) && has(b)`, map[string]string{"b": ""}, true},
	{`!has(a) || has(b)`, map[string]string{"a": ""}, false},
	{`!a == 'x'`, map[string]string{"a": "y"}, true}, // !(a == 'x')
	{`!a == 'x'`, none, true},

	// ! over parenthesised expressions.
	{`!(a == 'x' && b == 'y')`, map[string]string{"a": "x", "b": "y"}, false},
	{`!(a == 'x' && b == 'y')`, map[string]string{"a": "x"}, true},
	{`!(a == 'x' || b == 'y')`, map[string]string{"b": "y"}, false},
	{`!(a == 'x' || b == 'y')`, none, true},
	{`!!(a == 'x')`, map[string]string{"a": "x"}, true},
	{`!(!(a == 'x'))`, map[string]string{"a": "x"}, true},
	{`!!!has(a)`, map[string]string{"a": "x"}, false},
	{`!(a in {'x'})`, none, true},
	{`!(a not in {'x'})`, none, false},

	// Quoting.
	{`a == "x y"`, map[string]string{"a": "x y"}, true},
	{`a == 'it"s'`, map[string]string{"a": `it"s`}, true},
	{`a == "it's"`, map[string]string{"a": "it's"}, true},
	{`a in {"it's", 'say "hi"'}`, map[string]string{"a": `say "hi"`}, true},
	{`a == 'x'`, map[string]string{"a": "X"}, false}, // case-sensitive

	// Keys with Kubernetes qualified-name characters.
	{`projectcalico.org/namespace == 'prod'`, map[string]string{NamespaceLabel: "prod"}, true},
	{`pcns.kubernetes.io/metadata.name == 'kube-system'`, map[string]string{"pcns.kubernetes.io/metadata.name": "kube-system"}, true},
	{`calico/k8s_ns in {'a'}`, map[string]string{"calico/k8s_ns": "a"}, true},
	{`has(x-y.z/a_b)`, map[string]string{"x-y.z/a_b": ""}, true},
	// Words that are keywords elsewhere are fine as keys.
	{`has == 'x' && in in {'y'} && not != 'z'`, map[string]string{"has": "x", "in": "y"}, true},
	{`all == 'x'`, map[string]string{"all": "x"}, true},
}

func TestEvaluate(t *testing.T) {
	for _, tc := range evalCases {
		t.Run(fmt.Sprintf("%s/%v", tc.sel, tc.labels), func(t *testing.T) {
			sel, err := Parse(tc.sel)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := sel.Evaluate(tc.labels); got != tc.want {
				t.Errorf("Evaluate(%v) = %v, want %v", tc.labels, got, tc.want)
			}
			if got := sel.EvaluateLabels(MapLabels(tc.labels)); got != tc.want {
				t.Errorf("EvaluateLabels(%v) = %v, want %v", tc.labels, got, tc.want)
			}
			// The canonical form means the same.
			canon := MustParse(sel.String())
			if got := canon.Evaluate(tc.labels); got != tc.want {
				t.Errorf("canonical %s: Evaluate(%v) = %v, want %v", canon, tc.labels, got, tc.want)
			}
		})
	}
}

// merged is a Labels view over endpoint labels that win over profile
// labels, the way felix combines them.
type merged struct{ endpoint, profile map[string]string }

func (m merged) Get(k string) (string, bool) {
	if v, ok := m.endpoint[k]; ok {
		return v, true
	}
	v, ok := m.profile[k]
	return v, ok
}

func TestEvaluateLabels(t *testing.T) {
	l := merged{
		endpoint: map[string]string{"app": "web", "env": "dev"},
		profile:  map[string]string{"env": "prod", "team": "blue"},
	}
	tests := []struct {
		sel  string
		want bool
	}{
		{`app == 'web' && team == 'blue'`, true},
		{`env == 'dev'`, true},
		{`env == 'prod'`, false},
		{`has(team) && !has(owner)`, true},
		{`team not in {'red'}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.sel, func(t *testing.T) {
			if got := MustParse(tc.sel).EvaluateLabels(l); got != tc.want {
				t.Errorf("EvaluateLabels = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestZeroSelectorIsAll(t *testing.T) {
	var s Selector
	if !s.Evaluate(nil) {
		t.Error("zero Selector should match everything")
	}
	all := MustParse("all()")
	if s.String() != all.String() || s.UniqueID() != all.UniqueID() {
		t.Errorf("zero Selector = %s %s, want %s %s", s.String(), s.UniqueID(), all, all.UniqueID())
	}
}

func TestEvaluateDoesNotAllocate(t *testing.T) {
	sel := MustParse(benchSelector)
	labels := benchLabels()
	allocs := testing.AllocsPerRun(100, func() {
		sel.Evaluate(labels)
		sel.EvaluateLabels(MapLabels(labels))
	})
	if allocs != 0 {
		t.Errorf("Evaluate allocates %v times per run, want 0", allocs)
	}
}
