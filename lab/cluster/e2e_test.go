package cluster

import (
	"strings"
	"testing"
)

// TestParseGinkgoReport: specs the focus left out (skipped, no
// attempt) are not counted as skipped; a failed It and a failed suite
// setup both count as failures and are named.
func TestParseGinkgoReport(t *testing.T) {
	report := `[{"SpecReports":[
 {"LeafNodeType":"SynchronizedBeforeSuite","State":"passed","NumAttempts":1,"StartTime":"2026-12-05T08:00:00Z"},
 {"ContainerHierarchyTexts":["[sig-network] Netpol","NetworkPolicy between server and client"],"LeafNodeType":"It","LeafNodeText":"should support allow-all policy","State":"passed","NumAttempts":1,"StartTime":"2026-12-05T08:00:01Z"},
 {"ContainerHierarchyTexts":["[sig-network] Netpol"],"LeafNodeType":"It","LeafNodeText":"should enforce policy based on Ports","State":"failed","NumAttempts":1,"StartTime":"2026-12-05T08:00:02Z","Failure":{"Message":"reachability mismatch\nmore"}},
 {"ContainerHierarchyTexts":["[sig-network] Netpol"],"LeafNodeType":"It","LeafNodeText":"SCTP","State":"skipped","NumAttempts":1,"StartTime":"2026-12-05T08:00:03Z","Failure":{"Message":"no sctp"}},
 {"ContainerHierarchyTexts":["[sig-storage] x"],"LeafNodeType":"It","LeafNodeText":"not ours","State":"skipped","NumAttempts":0},
 {"LeafNodeType":"SynchronizedAfterSuite","State":"failed","NumAttempts":1,"StartTime":"2026-12-05T08:00:04Z","Failure":{"Message":"cleanup failed"}}
]}]`
	r, err := ParseGinkgoReport([]byte(report))
	if err != nil {
		t.Fatal(err)
	}
	if r.Passed != 1 || r.Failed != 2 || r.Skipped != 1 || r.NotSelected != 1 {
		t.Errorf("counts %+v, want 1 passed, 2 failed, 1 skipped, 1 not selected", r)
	}
	if got := r.Summary(); got != "1 passed, 2 failed, 1 skipped" {
		t.Errorf("summary %q", got)
	}
	if len(r.Failures) != 2 || !strings.Contains(r.Failures[1], "should enforce policy based on Ports: failed: reachability mismatch") ||
		!strings.Contains(r.Failures[0], "SynchronizedAfterSuite: failed: cleanup failed") {
		t.Errorf("failures %q", r.Failures)
	}
	if _, err := ParseGinkgoReport([]byte(`[]`)); err == nil {
		t.Error("an empty report was accepted")
	}
}
