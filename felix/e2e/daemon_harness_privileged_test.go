//go:build privileged && integration

package e2e

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// runDaemon runs felix's whole pipeline for node in nodeNS (datastore
// syncer over c -> calc -> rules -> drivers) until the test ends, and
// returns its dataplane. metrics may be nil.
func runDaemon(t *testing.T, c datastore.Client, nodeNS ns.NetNS, metrics *daemon.Metrics) *dataplane.Dataplane {
	t.Helper()
	return runDaemonMode(t, c, nodeNS, metrics, "iptables")
}

// runDaemonMode is runDaemon in dataplane mode.
func runDaemonMode(t *testing.T, c datastore.Client, nodeNS ns.NetNS, metrics *daemon.Metrics, mode string) *dataplane.Dataplane {
	t.Helper()
	dp, _ := startDaemon(t, c, nodeNS, metrics, mode)
	return dp
}

// startDaemon is runDaemonMode that also returns stop, which ends the
// daemon before the test does (it runs once). Over a kdd client the
// daemon is configured as felix's agent does it there (kdd's informer
// syncer, following Services); over any other client it reads through a
// plain watch syncer.
func startDaemon(t *testing.T, c datastore.Client, nodeNS ns.NetNS, metrics *daemon.Metrics, mode string) (*dataplane.Dataplane, func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dp := newModeDataplane(t, mode, nodeNS.Path(), dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}, V4: dataplane.BackendDefaultV4,
		RefreshInterval: time.Second, Logger: log,
	})
	d := daemon.New(daemon.Config{NodeName: node, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log, Metrics: metrics,
		FollowServices: daemon.FollowsServices(c)})
	var syncer datastore.Syncer = datastore.NewWatchSyncer(c, daemon.Kinds, d, datastore.Backoff{})
	if _, ok := c.(*kdd.Client); ok {
		syncer = daemon.NewSyncer(c, d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, syncer) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	t.Cleanup(stop)
	return dp, stop
}

// eventually fails the test unless cond holds within the given time.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
