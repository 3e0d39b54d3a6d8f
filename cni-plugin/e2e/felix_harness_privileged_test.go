//go:build privileged && integration

package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// runFelix runs felix's pipeline for node1 in the cluster's node
// namespace over its etcd until the test ends, and returns its dataplane.
func runFelix(t *testing.T, c *cluster) *dataplane.Dataplane {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dp := dataplane.New(dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: c.node.Path()}, V4: dataplane.BackendDefaultV4,
		RefreshInterval: time.Second, Logger: log,
	})
	d := daemon.New(daemon.Config{NodeName: "node1", Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, datastore.NewWatchSyncer(c.client, daemon.Kinds, d, datastore.Backoff{})) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("felix: %v", err)
		}
	})
	return dp
}

// waitFor fails the test unless cond holds within 20 seconds (felix
// programs the node asynchronously).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
