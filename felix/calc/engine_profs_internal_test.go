package calc

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestEngineForgetsProfileNames: the Engine keeps a profile name's state
// only while a valid profile has it or a local endpoint uses it. Profiles
// used by local endpoints, then deleted before or after their endpoints
// (or made invalid), leave nothing behind. (TestEngineEquivalence checks
// the same after every step of its random runs.)
func TestEngineForgetsProfileNames(t *testing.T) {
	e := NewEngine("node1")
	var objs []any
	for i := range 20 {
		p := &v3.Profile{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prof%d", i)}}
		w := &v3.WorkloadEndpoint{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("node1-k8s-p%d-eth0", i)},
			Spec: v3.WorkloadEndpointSpec{
				Orchestrator: "k8s", Node: "node1", Pod: fmt.Sprintf("p%d", i), Endpoint: "eth0",
				InterfaceName: fmt.Sprintf("calip%d", i), IPNetworks: []string{fmt.Sprintf("10.0.0.%d/32", i+1)},
				Profiles: []string{p.Name, "missing"},
			},
		}
		e.Upsert(p)
		e.Upsert(w)
		objs = append(objs, p, w)
	}
	res, _ := e.Flush()
	if len(res.Endpoints) != 20 || len(res.Profiles) != 20 || len(e.profs) != 20 {
		t.Fatalf("%d endpoints, %d profiles, %d profile states: the test does not exercise profile use",
			len(res.Endpoints), len(res.Profiles), len(e.profs))
	}
	for i := 0; i < len(objs); i += 2 {
		p, w := objs[i], objs[i+1]
		switch i / 2 % 3 {
		case 0: // the profile goes first
			e.Delete(p)
			e.Delete(w)
		case 1: // the endpoint goes first
			e.Delete(w)
			e.Delete(p)
		default: // the profile turns invalid, then the endpoint goes
			bad := p.(*v3.Profile).DeepCopy()
			bad.Spec.LabelsToApply = map[string]string{"bad key!": "x"}
			e.Upsert(bad)
			e.Delete(w)
		}
	}
	e.Flush()
	if len(e.profs) != 0 {
		t.Fatalf("profile states after every profile and endpoint went: %v, want none", e.profs)
	}
}
