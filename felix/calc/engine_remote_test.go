package calc_test

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"weak"

	"github.com/google/go-cmp/cmp"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// TestEngineKeepsNoDecodedRemoteEndpoint: once an endpoint of another node
// is loaded, the Engine holds only its compact form: the decoded object
// (metadata, identifiers, its own label map) can be freed. A local
// endpoint's object may be kept.
func TestEngineKeepsNoDecodedRemoteEndpoint(t *testing.T) {
	e := calc.NewEngine(ct.Node)
	for _, o := range ct.Synthetic(10, 2, 0) {
		e.Upsert(o)
	}
	var refs []weak.Pointer[v3.WorkloadEndpoint]
	for i := range 50 {
		w := ct.WEP("ns0", fmt.Sprintf("r%d", i), "node2", "cali1", fmt.Sprintf("10.9.0.%d", i), map[string]string{"app": "a0"})
		refs = append(refs, weak.Make(w))
		e.Upsert(w)
	}
	res, _ := e.Flush()
	if len(res.IPSets) == 0 {
		t.Fatal("no ipsets: the test does not exercise membership")
	}
	runtime.GC()
	kept := 0
	for _, r := range refs {
		if r.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Fatalf("%d of 50 decoded remote endpoints are still reachable after loading", kept)
	}
	runtime.KeepAlive(e)
}

// TestEngineReserveChangesNothing: an Engine told the snapshot's size
// before loading it (Reserve, in the middle too) computes what one that
// was not told computes, and goes on doing so through changes.
func TestEngineReserveChangesNothing(t *testing.T) {
	objs := ct.Synthetic(40, 6, 400)
	plain, told := calc.NewEngine(ct.Node), calc.NewEngine(ct.Node)
	told.Reserve(v3.KindWorkloadEndpoint, 300)
	for i, o := range objs {
		if i == len(objs)/2 {
			told.Reserve(v3.KindWorkloadEndpoint, 1000)
			told.Reserve(v3.KindNetworkPolicy, 10)
		}
		plain.Upsert(o)
		told.Upsert(o)
	}
	for step := range 3 {
		a, _ := plain.Flush()
		b, _ := told.Flush()
		if d := cmp.Diff(a, b, resultOpts...); d != "" {
			t.Fatalf("step %d: with Reserve the result differs (-without +with):\n%s", step, d)
		}
		if len(a.IPSets) == 0 {
			t.Fatal("no ipsets: the test does not exercise membership")
		}
		w := ct.WEP("ns0", fmt.Sprintf("late%d", step), "node2", "cali1", fmt.Sprintf("10.9.1.%d", step), map[string]string{"app": "a0"})
		plain.Upsert(w)
		told.Upsert(w)
		plain.Delete(objs[len(objs)-1-step])
		told.Delete(objs[len(objs)-1-step])
	}
}

// TestEngineLargeFirstLoadAsCompute: a first load large enough for the
// sets' members to be sorted in on every CPU (over 20,000 members) gives
// what Compute gives, and so do changes after it.
func TestEngineLargeFirstLoadAsCompute(t *testing.T) {
	objs := ct.Synthetic(20, 4, 12_000)
	e := calc.NewEngine(ct.Node)
	for _, o := range objs {
		e.Upsert(o)
	}
	members := 0
	for step := range 2 {
		got, _ := e.Flush()
		want := calc.Compute(ct.Input(ct.Node, objs))
		if !reflect.DeepEqual(ct.PlainSets(want), ct.PlainSets(got)) {
			t.Fatalf("step %d: engine differs from Compute (-compute +engine):\n%s", step, cmp.Diff(want, got, resultOpts...))
		}
		if step == 0 {
			for _, s := range got.IPSets {
				members += s.Members.Len()
			}
		}
		// One endpoint goes, another comes.
		e.Delete(objs[len(objs)-1])
		w := ct.WEP("ns0", fmt.Sprintf("late%d", step), "node2", "cali1", fmt.Sprintf("10.9.2.%d", step), map[string]string{"app": "a0"})
		e.Upsert(w)
		objs = append(objs[:len(objs)-1], w)
	}
	if members < 20_000 {
		t.Fatalf("%d members: the test does not reach the parallel sort", members)
	}
}
