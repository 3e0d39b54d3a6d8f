package lab

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProbeJobsUseEachPodsPorts: every pod is probed on exactly the
// ports it serves (a DNS pod on 53/udp+tcp, a database on 5432), never on
// another pod's; --ports narrows them.
func TestProbeJobsUseEachPodsPorts(t *testing.T) {
	pods := []PodState{
		{Namespace: "kube-system", Name: "coredns", Ports: []Port{{Port: 53, Protocol: "UDP"}, {Port: 53, Protocol: "TCP"}}},
		{Namespace: "db", Name: "pg", Ports: []Port{{Port: 5432, Protocol: "TCP"}}},
		{Namespace: "dev", Name: "tester", Ports: []Port{{Port: 8080, Protocol: "TCP"}}},
	}
	lines := func(only []Port) []string {
		var out []string
		for _, j := range probeJobs(pods, only) {
			out = append(out, j.From+" -> "+j.To+" "+j.Port)
		}
		return out
	}
	want := []string{
		"kube-system/coredns -> db/pg tcp/5432",
		"kube-system/coredns -> dev/tester tcp/8080",
		"db/pg -> kube-system/coredns tcp/53",
		"db/pg -> kube-system/coredns udp/53",
		"db/pg -> dev/tester tcp/8080",
		"dev/tester -> kube-system/coredns tcp/53",
		"dev/tester -> kube-system/coredns udp/53",
		"dev/tester -> db/pg tcp/5432",
	}
	if d := cmp.Diff(want, lines(nil)); d != "" {
		t.Errorf("probes (-want +got):\n%s", d)
	}
	want = []string{"db/pg -> kube-system/coredns udp/53", "dev/tester -> kube-system/coredns udp/53"}
	if d := cmp.Diff(want, lines([]Port{{Port: 53, Protocol: "UDP"}, {Port: 81, Protocol: "UDP"}})); d != "" {
		t.Errorf("probes on udp/53 and udp/81 only (-want +got):\n%s", d)
	}
}
