package calc_test

import (
	"fmt"
	"runtime"
	"testing"
	"weak"

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
