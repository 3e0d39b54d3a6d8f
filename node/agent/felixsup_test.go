package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	felixagent "github.com/tabbynet/tabby/felix/agent"
	felixhealth "github.com/tabbynet/tabby/felix/health"
	"github.com/tabbynet/tabby/node/health"
)

// TestSuperviseFelix: felix stopping on a start-time setting is started
// again in-process (its parts not ready in between, naming the restart);
// any other error ends calico-node; a planned stop is no error.
func TestSuperviseFelix(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ok := func() (bool, string) { return true, "" }
	allOK := map[string]felixhealth.Check{"datastore": ok, "dataplane": ok, "routes": ok, "settings": ok}
	broken := errors.New("iptables-restore failed")

	a := health.NewAggregator(nil)
	fh := newFelixHealth(a)
	var runs int
	var between string
	err := superviseFelix(context.Background(), func(ctx context.Context) error {
		runs++
		if runs > 1 {
			reps, _ := a.Reports("felix/routes")
			between = reps[0].Detail
		}
		fh.Ready(allOK)
		if runs < 3 {
			return fmt.Errorf("%w: routeRefreshInterval", felixagent.ErrConfigChanged)
		}
		return broken
	}, fh, log)
	if !errors.Is(err, broken) || runs != 3 {
		t.Fatalf("got %v after %d runs; want the third run's error", err, runs)
	}
	if !strings.Contains(between, "felix restarting: felix configuration changed; restart to apply it: routeRefreshInterval") {
		t.Errorf("felix/routes between runs: %q", between)
	}

	ctx, cancel := context.WithCancel(context.Background())
	runs = 0
	err = superviseFelix(ctx, func(ctx context.Context) error {
		runs++
		cancel()
		return fmt.Errorf("%w: stopping", felixagent.ErrConfigChanged)
	}, fh, log)
	if err != nil || runs != 1 {
		t.Fatalf("planned stop: %v after %d runs", err, runs)
	}
}
