package dataplane_test

import (
	"context"
	"testing"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

// BenchmarkApplyOneChange is the driver's own (Go-side) cost of applying
// one policy's change on the synthetic 1,000-policy / 500-local /
// 5,000-remote cluster, against the fake kernel: diffing the desired
// state with the cached actual one and writing the one-chain restore.
func BenchmarkApplyOneChange(b *testing.B) {
	ctx := context.Background()
	e := ct.Load(ct.Node, ct.Synthetic(1000, 500, 5000))
	r := rules.NewRenderer(rules.DefaultConfig(), 4)
	var sets [2]*rules.Ruleset
	for v := range 2 {
		e.Upsert(ct.SyntheticPolicy(0, v))
		sets[v] = r.RenderChanges(e.Flush())
	}
	k := fake.NewKernel()
	dp := newDP(k)
	dp.SetDesired(sets[0])
	if _, err := dp.Apply(ctx); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		dp.SetDesired(sets[i%2])
		res, err := dp.Apply(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res.V4.ChainsWritten != 1 {
			b.Fatalf("wrote %d chains, want 1", res.V4.ChainsWritten)
		}
	}
}
