package dataplane_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
)

// TestAppendHooks: with ChainInsertMode Append felix's hook goes after
// the rules already in a base chain, and is moved back to the end when
// another rule is appended after it; Calico's restore/save counters count
// the runs.
func TestAppendHooks(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	k.SetRules(4, "DOCKER", []string{"-j RETURN"})
	k.SetRules(4, "FORWARD", []string{"-j DOCKER"})
	reg := prometheus.NewRegistry()
	m := dataplane.NewMetrics(reg)
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4, AppendHooks: true,
		Logger: slog.New(slog.DiscardHandler), Metrics: m})
	want := render(ct.Scenario())
	dp.SetDesired(want[0])
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	fwd := k.Rules(4, "FORWARD")
	if len(fwd) != 2 || fwd[0] != "-j DOCKER" || !strings.Contains(fwd[1], "cali-FORWARD") {
		t.Fatalf("FORWARD = %q, want the foreign rule then felix's hook", fwd)
	}
	k.SetRules(4, "FORWARD", append(fwd, "-j DOCKER"))
	dp.InvalidateCaches()
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	fwd = k.Rules(4, "FORWARD")
	if len(fwd) != 3 || !strings.Contains(fwd[2], "cali-FORWARD") || strings.Count(strings.Join(fwd, "\n"), "cali-FORWARD") != 1 {
		t.Errorf("FORWARD = %q, want felix's hook once, last", fwd)
	}
	if got, want := testutil.ToFloat64(m.RestoreCalls), float64(k.Count("iptables-restore")); got != want || got == 0 {
		t.Errorf("felix_iptables_restore_calls = %v, the kernel saw %v", got, want)
	}
	if got, want := testutil.ToFloat64(m.SaveCalls), float64(k.Count("iptables-save")); got != want || got == 0 {
		t.Errorf("felix_iptables_save_calls = %v, the kernel saw %v", got, want)
	}
}
