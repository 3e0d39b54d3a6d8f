package multinode

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/felix/rules"
)

// Felix is one node's in-process felix.
type Felix struct {
	Dataplane *dataplane.Dataplane
	Daemon    *daemon.Daemon
	Routes    *routes.Manager
}

// StartFelix runs felix for the node (datastore syncer -> calc -> rules ->
// iptables/ipset drivers in the node's namespace) until the test ends.
func (n *Node) StartFelix() *Felix {
	t := n.c.t
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", n.Name)
	status := epstatus.NewReporter(n.StatusPrefix, log)
	dpCfg := dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: n.Path()}, V4: dataplane.BackendDefaultV4,
		RefreshInterval: 10 * time.Second, Logger: log, OnApplied: status.Applied,
	}
	versions := []int{4}
	if n.c.ipv6 {
		dpCfg.V6 = dataplane.BackendDefaultV6
		versions = append(versions, 6)
	}
	dp := dataplane.New(dpCfg)
	drv := routes.NewDriver(n.NL, log)
	drv.Sysctl = n.Sysctl
	drv.MTUFile = filepath.Join(n.StatusPrefix, "mtu")
	rm := routes.NewManager(routes.ManagerConfig{NodeName: n.Name, Driver: drv, RefreshInterval: 10 * time.Second, Logger: log})
	d := daemon.New(daemon.Config{NodeName: n.Name, Rules: rules.DefaultConfig(), IPVersions: versions, Dataplane: dp, Logger: log, Routes: rm,
		EndpointStatus: status})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- d.Run(ctx, daemon.NewSyncer(n.c.Client, d)) }()
	go func() { done <- rm.Run(ctx) }()
	go func() { done <- status.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("felix on %s: %v", n.Name, err)
			}
		}
	})
	return &Felix{Dataplane: dp, Daemon: d, Routes: rm}
}
