package daemon_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUnrenderableLoggedOnceAndCounted: a rule enforced fail-closed is
// logged and counted (by handling and reason) once when it appears, not
// on every computation, and counted again when it reappears.
func TestUnrenderableLoggedOnceAndCounted(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewRegistry()
	m := daemon.NewMetrics(reg)
	dp := dataplane.New(dataplane.Config{Runner: fake.NewKernel(), V4: dataplane.BackendDefaultV4, Logger: slog.New(slog.DiscardHandler)})
	d := daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log, Metrics: m})

	gnp := ct.GNP("guard", "default", ct.Ptr(10.0), "all()", ct.Ingress, []v3.Rule{
		{Action: v3.Deny, Source: v3.EntityRule{Services: &v3.ServiceMatch{Name: "api", Namespace: "dev"}}}}, nil)
	d.OnUpdates(updates(ct.NSProfile("prod", nil), ct.WEP("prod", "web", ct.Node, "cali1111", "10.65.0.1", nil), gnp))
	d.OnStatusUpdated(datastore.StatusInSync)
	counted := m.Unrenderable.WithLabelValues("widened", "services-match")
	for range 3 {
		d.Recompute()
	}
	if n := strings.Count(logs.String(), "cannot be enforced as written"); n != 1 {
		t.Errorf("logged %d times over 3 computations, want once:\n%s", n, logs.String())
	}
	if got := testutil.ToFloat64(counted); got != 1 {
		t.Errorf("felix_calc_unrenderable_rules_total{widened,services-match} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.UnrenderableNow); got != 1 {
		t.Errorf("felix_calc_unrenderable_rules = %v, want 1", got)
	}

	d.OnUpdates([]datastore.Update{{Type: datastore.EventDeleted, Key: datastore.KeyOf(gnp), Object: gnp}})
	d.Recompute()
	if got := testutil.ToFloat64(m.UnrenderableNow); got != 0 {
		t.Errorf("after the delete felix_calc_unrenderable_rules = %v, want 0", got)
	}
	d.OnUpdates(updates(gnp))
	d.Recompute()
	if got := testutil.ToFloat64(counted); got != 2 {
		t.Errorf("after it reappeared the counter = %v, want 2", got)
	}
}
