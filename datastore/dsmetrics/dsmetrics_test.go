package dsmetrics

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tabbynet/tabby/datastore"
)

// TestRegister: the metrics keep their names and help, registering twice
// is fine, and a scrape reads the datastore's counts.
func TestRegister(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	if err := Register(reg); err != nil {
		t.Fatal(err)
	}
	if err := Register(reg); err != nil {
		t.Fatalf("second Register: %v", err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	// No record counted yet in this process: no series, and the
	// descriptions are valid (the pedantic registry checks them).
	n, err := testutil.GatherAndCount(reg, "tabby_datastore_undecodable_records_total", "tabby_datastore_unconvertible_rules_total")
	if err != nil || n != 0 {
		t.Fatalf("series %d %v, want 0", n, err)
	}
	// A bad record seen by a syncer is then one series of 1.
	r := &datastore.BadRecordReporter{Logger: slog.New(slog.DiscardHandler)}
	r.Seen("k", datastore.BadRecord{Key: datastore.Key{Kind: "IPPool", Name: "p"}, StorageKey: "/p", Revision: "1", Err: errors.New("bad")})
	want := "# HELP tabby_datastore_undecodable_records_total Stored records a syncer skipped because they cannot be decoded, each key and revision counted once.\n# TYPE tabby_datastore_undecodable_records_total counter\ntabby_datastore_undecodable_records_total{kind=\"IPPool\"} 1\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tabby_datastore_undecodable_records_total"); err != nil {
		t.Error(err)
	}
	var b strings.Builder
	for _, d := range []*prometheus.Desc{undecodableDesc, unconvertibleDesc} {
		b.WriteString(d.String())
	}
	for _, want := range []string{"tabby_datastore_undecodable_records_total", "tabby_datastore_unconvertible_rules_total", `variableLabels: {kind}`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("descriptions %s lack %s", b.String(), want)
		}
	}
}
