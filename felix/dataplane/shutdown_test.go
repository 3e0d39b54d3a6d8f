package dataplane_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/tabbynet/tabby/internal/testlog"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
)

// killedOnCancel is a Runner whose iptables-restore runs until the context
// ends and then fails as exec does for a process killed by its context
// ("signal: killed", not context.Canceled).
type killedOnCancel struct {
	*fake.Kernel
	started chan struct{}
	once    sync.Once
}

func (k *killedOnCancel) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	if name != "iptables-restore" && name != "iptables-nft-restore" && name != "iptables-legacy-restore" {
		return k.Kernel.Run(ctx, name, args, stdin)
	}
	k.once.Do(func() { close(k.started) })
	<-ctx.Done()
	return nil, errors.New("running " + name + ": signal: killed")
}

// TestRunShutdownDuringSyncIsNoError: a SIGTERM (ctx cancelled) while a
// restore runs kills it; Run returns the context's error without logging
// an ERROR or counting a sync failure.
func TestRunShutdownDuringSyncIsNoError(t *testing.T) {
	k := &killedOnCancel{Kernel: fake.NewKernel(), started: make(chan struct{})}
	var logs testlog.Buffer
	reg := prometheus.NewRegistry()
	dp := dataplane.New(dataplane.Config{
		Runner: k, V4: dataplane.BackendDefaultV4,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Metrics: dataplane.NewMetrics(reg),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dp.Run(ctx) }()
	dp.SetDesired(render(ct.Scenario())[0])
	<-k.started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if s := logs.String(); bytes.Contains([]byte(s), []byte("level=ERROR")) {
		t.Errorf("shutdown logged an error:\n%s", s)
	}
	if got := metric(t, reg, "felix_dataplane_failures_total"); got != 0 {
		t.Errorf("felix_dataplane_failures_total = %v, want 0", got)
	}
}
