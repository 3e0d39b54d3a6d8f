package calc_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// TestMemoRandomChanges applies a long random series of changes of every
// kind (ct.Mutate), each time in a shuffled order, and checks every
// memoised result against a from-scratch Compute. It covers the
// incremental paths: the endpoint pass reused, the tier lists reused, the
// selector answers shared.
func TestMemoRandomChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	objs := ct.Churn()
	memo := calc.NewMemo()
	for step := range 80 {
		objs = ct.Mutate(rng, objs, step)
		want := calc.Compute(ct.Input(ct.Node, objs))
		got := calc.ComputeWith(ct.Input(ct.Node, objs), memo)
		if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
			t.Fatalf("step %d: memo result differs (-plain +memo):\n%s", step, diff)
		}
	}
}
