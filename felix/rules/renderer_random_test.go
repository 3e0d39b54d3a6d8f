package rules_test

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestRendererRandomChanges: through a long random series of changes of
// every kind (ct.Mutate), a caching Renderer per version fed by one
// calc.Memo gives exactly a fresh Render of a fresh Compute.
func TestRendererRandomChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	objs := ct.Churn()
	memo := calc.NewMemo()
	r4, r6 := rules.NewRenderer(rules.DefaultConfig(), 4), rules.NewRenderer(rules.DefaultConfig(), 6)
	for step := range 60 {
		objs = ct.Mutate(rng, objs, step)
		res := calc.ComputeWith(ct.Input(ct.Node, objs), memo)
		fresh := calc.Compute(ct.Input(ct.Node, objs))
		for _, c := range []struct {
			r *rules.Renderer
			v int
		}{{r4, 4}, {r6, 6}} {
			want := rules.Render(rules.DefaultConfig(), fresh, c.v)
			if diff := cmp.Diff(want, c.r.Render(res)); diff != "" {
				t.Fatalf("step %d v%d: cached render differs (-fresh +cached):\n%s", step, c.v, diff)
			}
		}
	}
}
