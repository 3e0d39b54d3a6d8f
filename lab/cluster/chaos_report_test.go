package cluster

import (
	"strings"
	"testing"
	"time"
)

// TestDupTracker: an address shown for two live pods opens an overlap,
// closed with its duration when one of them lets it go; only overlaps of
// dupGrace or longer are duplicates, open ones counted up to now.
func TestDupTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := newDupTracker()
	d.Update(t0, "p1", []podAddr{{"a", "10.0.0.1"}, {"b", "10.0.0.2"}})
	d.Update(t0.Add(time.Second), "p1", []podAddr{{"a", "10.0.0.1"}, {"b", "10.0.0.1"}, {"c", "10.0.0.3"}})
	d.Update(t0.Add(2*time.Second), "p1", []podAddr{{"a", "10.0.0.1"}, {"c", "10.0.0.3"}, {"d", "10.0.0.3"}})
	all, dups := d.Overlaps(t0.Add(2 * time.Second))
	if len(all) != 2 || dups != 0 {
		t.Fatalf("overlaps %+v, %d dups; want 2 short ones", all, dups)
	}
	if all[0].IP != "10.0.0.1" || all[0].A != "a" || all[0].B != "b" || all[0].Dur != time.Second {
		t.Errorf("first overlap %+v", all[0])
	}
	// c and d still share 10.0.0.3 four seconds later: a duplicate.
	all, dups = d.Overlaps(t0.Add(6 * time.Second))
	if dups != 1 || all[1].Dur != 4*time.Second || all[1].Phase != "p1" {
		t.Errorf("after 6 s: %+v, %d dups", all, dups)
	}
	if len(d.pods) != 4 {
		t.Errorf("pods seen %v", d.pods)
	}
}

// TestChaosInvariants: one line per invariant in the format,
// OK with figures on a clean run, VIOLATED with what happened otherwise.
func TestChaosInvariants(t *testing.T) {
	clean := ChaosSummary{Target: 10, Created: 12, Deleted: 12, PodsSeen: 20, StreamRequests: 500, StreamSpan: time.Minute,
		Probes: 1000, Faults: []FaultResult{{Fault: FaultPowerLoss, Ready: 12300 * time.Millisecond}}}
	var lines []string
	for _, i := range clean.Invariants() {
		if !i.OK {
			t.Errorf("clean run: %s", i)
		}
		lines = append(lines, i.String())
	}
	want := []string{
		"invariant churn: OK (12 pod creations and 12 deletions through the API in 0s)",
		"invariant no-duplicate-address: OK (20 live pods watched, 0 addresses held by two; 0 API overlaps shorter than 3s, longest 0s)",
		"invariant stream-unbroken: OK (500 requests on one TCP connection between pods on node-2 and node-1 over 1m0s)",
		"invariant no-forbidden-connection: OK (1000 probes into and out of the default-deny namespace every 100 ms, 0 got through)",
		"invariant no-leaks: OK (0 leaked addresses, blocks, handles, WorkloadEndpoints, veths, routes or chains after each of 1 faults and at the end)",
		"invariant ready-after-each-fault: OK (power-loss 12.3 s)",
	}
	if got := strings.Join(lines, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	bad := clean
	bad.Forbidden, bad.ForbiddenFirst = 2, "into guard"
	bad.StreamBroken = "request 7: EOF"
	bad.Overlaps = []Overlap{{IP: "10.0.0.1", A: "x/a", B: "x/b", Dur: 5 * time.Second, Phase: FaultDatastore}}
	bad.Faults = []FaultResult{{Fault: FaultRoll, ReadyErr: "timeout", Leaks: []string{"node-3 veth cali1 leaked"}}}
	bad.Created = 3
	for _, i := range bad.Invariants() {
		if i.OK {
			t.Errorf("violated run: %s", i)
		}
		if !strings.HasPrefix(i.String(), "invariant "+i.Name+": VIOLATED (") {
			t.Errorf("format: %s", i)
		}
	}
}

// TestSetDiff names leaked and missing members, sorted.
func TestSetDiff(t *testing.T) {
	got := setDiff("node-1 veth", []string{"calia", "calib"}, []string{"calib", "calic"})
	want := []string{"node-1 veth calia leaked", "node-1 veth calic missing"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %v want %v", got, want)
	}
}
