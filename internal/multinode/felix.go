package multinode

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/felix/ifacewatch"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/felix/rules"
)

// Felix is one node's in-process felix.
type Felix struct {
	Dataplane *dataplane.Dataplane
	Daemon    *daemon.Daemon
	Routes    *routes.Manager
}

// FelixOptions adjust a node's felix for a test.
type FelixOptions struct {
	// WorkloadRouteGrace is how long the route driver leaves a workload
	// route no endpoint explains [default the driver's].
	WorkloadRouteGrace time.Duration
	// RouteRefresh is the route manager's resync interval [default 10s].
	RouteRefresh time.Duration
	// Registry, when set, receives the daemon's and the route manager's
	// metrics.
	Registry prometheus.Registerer
	// Logger, when set, receives felix's log [default stderr, warnings
	// and errors only].
	Logger *slog.Logger
}

// StartFelix runs felix for the node (datastore syncer -> calc -> rules ->
// iptables/ipset drivers in the node's namespace, the route manager, the
// interface address watcher) until the test ends.
func (n *Node) StartFelix() *Felix { return n.StartFelixWith(FelixOptions{}) }

// StartFelixWith is StartFelix with options.
func (n *Node) StartFelixWith(o FelixOptions) *Felix {
	t := n.c.t
	t.Helper()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	log = log.With("node", n.Name)
	if o.RouteRefresh == 0 {
		o.RouteRefresh = 10 * time.Second
	}
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
	if o.WorkloadRouteGrace > 0 {
		drv.WorkloadRouteGrace = o.WorkloadRouteGrace
	}
	rmCfg := routes.ManagerConfig{NodeName: n.Name, Driver: drv, RefreshInterval: o.RouteRefresh, Logger: log}
	dCfg := daemon.Config{NodeName: n.Name, Rules: rules.DefaultConfig(), IPVersions: versions, Dataplane: dp, Logger: log,
		EndpointStatus: status}
	if o.Registry != nil {
		rmCfg.Metrics, dCfg.Metrics = routes.NewMetrics(o.Registry), daemon.NewMetrics(o.Registry)
	}
	rm := routes.NewManager(rmCfg)
	dCfg.Routes = rm
	d := daemon.New(dCfg)
	ctx, cancel := context.WithCancel(context.Background())
	runs := []func() error{
		func() error { return d.Run(ctx, daemon.NewSyncer(n.c.Client, d)) },
		func() error { return rm.Run(ctx) },
		func() error { return status.Run(ctx) },
		func() error {
			return ifacewatch.Watch(ctx, ifacewatch.Config{NetnsPath: n.Path(), Report: d.OnHostInterfaces, Logger: log})
		},
	}
	done := make(chan error, len(runs))
	for _, run := range runs {
		go func() { done <- run() }()
	}
	t.Cleanup(func() {
		cancel()
		for range runs {
			if err := <-done; err != nil {
				t.Errorf("felix on %s: %v", n.Name, err)
			}
		}
	})
	return &Felix{Dataplane: dp, Daemon: d, Routes: rm}
}
