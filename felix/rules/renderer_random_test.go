package rules_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestRendererRandomChanges: through a long random series of changes of
// every kind (ct.Mutate) fed to an Engine, a caching Renderer per version
// rendering each Flush's Delta (RenderChanges, the daemon's path) gives
// exactly a fresh Render of a fresh Compute, and its set versions and
// changes lead from earlier contents to the new ones.
func TestRendererRandomChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	objs := ct.Churn()
	h := newEngineHarness(objs)
	for step := range 60 {
		objs = ct.Mutate(rng, slices.Clone(objs), step)
		h.check(t, fmt.Sprint("step ", step), objs)
	}
	if h.changes == 0 {
		t.Fatal("no set change was given: the versions' changes went unchecked")
	}
}

// engineHarness is the daemon's calculation and rendering: an Engine fed
// the changes between object lists, and a caching Renderer per IP
// version rendering each Flush with its Delta.
type engineHarness struct {
	e         *calc.Engine
	objs      []any
	renderers map[int]*rules.Renderer
	// versions holds, per IP version, the members of every set version
	// the Renderer handed out.
	versions map[int]map[uint64][]string
	// changes counts the set changes checked.
	changes int
}

func newEngineHarness(objs []any) *engineHarness {
	h := &engineHarness{e: ct.Load(ct.Node, objs), objs: objs,
		renderers: map[int]*rules.Renderer{}, versions: map[int]map[uint64][]string{}}
	for _, v := range []int{4, 6} {
		h.renderers[v] = rules.NewRenderer(rules.DefaultConfig(), v)
		h.versions[v] = map[uint64][]string{}
	}
	return h
}

// check feeds the Engine the changes from the last objects to objs,
// renders the Flush and compares each version's Ruleset with a fresh
// Render of Compute(objs).
func (h *engineHarness) check(t *testing.T, what string, objs []any) {
	t.Helper()
	ct.Sync(h.e, h.objs, objs)
	h.objs = objs
	res, delta := h.e.Flush()
	fresh := calc.Compute(ct.Input(ct.Node, objs))
	for _, v := range []int{4, 6} {
		got := h.renderers[v].RenderChanges(res, delta)
		want := rules.Render(rules.DefaultConfig(), fresh, v)
		ignore := cmpopts.IgnoreFields(rules.Ruleset{}, "IPSetVersions", "IPSetChanges")
		if diff := cmp.Diff(want, got, ignore); diff != "" {
			t.Fatalf("%s v%d: RenderChanges differs (-fresh Render of Compute +RenderChanges):\n%s", what, v, diff)
		}
		h.changes += checkSetVersions(t, fmt.Sprintf("%s v%d", what, v), h.versions[v], got)
	}
}

// checkSetVersions checks a RenderChanges Ruleset's set versions and
// changes against the contents of earlier versions (seen), and records
// its own: a version names one content, and a change applied to the
// content of its Since version gives the new members. It returns the
// number of changes checked.
func checkSetVersions(t *testing.T, what string, seen map[uint64][]string, rs *rules.Ruleset) int {
	t.Helper()
	changes := 0
	for _, spec := range rs.IPSets {
		got := spec.Members.Slice()
		v, ok := rs.IPSetVersions[spec.Name]
		if !ok {
			t.Fatalf("%s: set %s has no version", what, spec.Name)
		}
		if ch, ok := rs.IPSetChanges[spec.Name]; ok {
			changes++
			base, known := seen[ch.Since]
			if !known {
				t.Fatalf("%s: set %s changes since version %d, never handed out", what, spec.Name, ch.Since)
			}
			want := slices.DeleteFunc(slices.Clone(base), func(m string) bool { return slices.Contains(ch.Removed, m) })
			want = append(want, ch.Added...)
			slices.Sort(want)
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("%s: set %s: the change since version %d does not lead to its members (-applied +members):\n%s", what, spec.Name, ch.Since, diff)
			}
		}
		if prev, ok := seen[v]; ok && !slices.Equal(prev, got) {
			t.Fatalf("%s: set %s: version %d held %v, now %v", what, spec.Name, v, prev, got)
		}
		seen[v] = got
	}
	return changes
}
