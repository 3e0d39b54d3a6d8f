package dataplane_test

import (
	"context"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
)

// TestMembershipChangeRunsNoIptables: a remote endpoint that appears (or
// goes) only changes ipset members, so the apply is one small ipset
// restore and no iptables restore at all (the kernel cost of an iptables
// commit grows with the whole table).
func TestMembershipChangeRunsNoIptables(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := newDP(k)
	objs := ct.Scenario()
	dp.SetDesired(render(objs)...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	var remote *v3.WorkloadEndpoint
	for _, o := range objs {
		if w, ok := o.(*v3.WorkloadEndpoint); ok && w.Spec.Node != ct.Node && len(w.Spec.IPNetworks) > 0 {
			remote = w
			break
		}
	}
	if remote == nil {
		t.Fatal("scenario has no remote endpoint")
	}
	twin := remote.DeepCopy()
	twin.Name += "-twin"
	twin.Spec.IPNetworks = []string{"10.123.45.67/32"}
	for step, set := range [][]any{append(objs[:len(objs):len(objs)], twin), objs} {
		want := render(set)
		before := len(k.Calls())
		dp.SetDesired(want...)
		res, err := dp.Apply(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkMatches(t, k, want)
		calls := k.Calls()[before:]
		if res.V4.Restores+res.V6.Restores != 0 || res.SetsWritten == 0 || len(calls) != 1 || !strings.HasPrefix(calls[0], "ipset") {
			t.Errorf("step %d: got %v with calls %q, want one ipset call and no iptables restore", step, res, calls)
		}
	}
}
