// Package agent runs felix, the node agent's policy path: it watches the
// datastore, computes the policy of the node's endpoints and programs
// iptables, ipsets and routes. Configuration comes from Calico's FELIX_*
// environment variables and the datastore variables (DATASTORE_TYPE,
// ETCD_ENDPOINTS, ... or FELIX_DATASTORETYPE, ...); with the Kubernetes
// datastore it follows the API server through informers (daemon.NewSyncer)
// and routes client-go's klog output to slog. It is wiring only (see
// felix/daemon), shared by the felix command and calico-node, which runs
// felix in-process.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/felix/rules"
)

// Options are what the caller of Run decides; the rest is configuration
// from the environment.
type Options struct {
	// Getenv reads the environment (os.Getenv in production).
	Getenv func(string) string
	// Stderr receives the log when Logger is nil (os.Stderr if nil).
	Stderr io.Writer
	// Logger, when set, is used as is (calico-node shares one); else Run
	// makes one at FELIX_LOGSEVERITYSCREEN and makes it slog's default.
	Logger *slog.Logger
	// Registry, when set, holds felix's metrics (served on felix's metrics
	// port) so the embedding agent can add its own; else felix makes one.
	Registry *prometheus.Registry
	// Health, when set, receives felix's loop heartbeats and readiness
	// instead of felix serving its own health endpoint (calico-node
	// serves one for all its parts).
	Health Health
}

// Health is where an embedding agent collects felix's health.
type Health interface {
	// Heartbeat is called on every turn of the calculation and dataplane
	// loops (each at least every 10s).
	Heartbeat(loop string)
	// Ready is given felix's readiness: the dataplane in sync.
	Ready(inSync func() bool)
}

// Run runs felix until ctx is cancelled (a clean stop returns nil and
// leaves the dataplane in place).
func Run(ctx context.Context, o Options) error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := o.Logger
	if log == nil {
		stderr := o.Stderr
		if stderr == nil {
			stderr = os.Stderr
		}
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
		slog.SetDefault(log)
		// client-go (the Kubernetes datastore's informers) logs through klog.
		klog.SetSlogLogger(log)
	}
	dsconfig.NewKubernetesClient = kdd.FromSpec
	dsconfig.NewEtcdTransport = etcdlib.New // long-running: etcd's client library
	spec, err := dsconfig.Load("/etc/calico/calicoctl.cfg", false, datastoreEnv(getenv))
	if err != nil {
		return err
	}
	client, err := dsconfig.New(spec)
	if err != nil {
		return fmt.Errorf("connecting to the datastore: %w", err)
	}
	defer client.Close()

	runner := dataplane.ExecRunner{NetnsPath: cfg.netnsPath}
	v4, v6, err := dataplane.BackendsFor(ctx, runner, cfg.iptablesBackend)
	if err != nil {
		return err
	}
	log.Info("iptables backend", "save", v4.Save, "restore", v4.Restore)
	dpCfg := dataplane.Config{Runner: runner, V4: v4, RefreshInterval: cfg.refreshInterval, Logger: log}
	versions := []int{4}
	if cfg.ipv6 {
		dpCfg.V6 = v6
		versions = append(versions, 6)
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	dpCfg.Metrics = dataplane.NewMetrics(reg)
	if err := datastore.RegisterMetrics(reg); err != nil {
		return err
	}
	var status *epstatus.Reporter
	if cfg.statusPrefix != "" {
		status = epstatus.NewReporter(cfg.statusPrefix, log)
		dpCfg.OnApplied = status.Applied
		go func() { _ = status.Run(ctx) }()
	}
	if o.Health != nil {
		dpCfg.Heartbeat = func() { o.Health.Heartbeat("dataplane") }
	}
	dp := dataplane.New(dpCfg)
	rm, closeRoutes, err := newRouteManager(cfg, log, reg)
	if err != nil {
		return err
	}
	defer closeRoutes()
	go func() { _ = rm.Run(ctx) }()
	dcfg := daemon.Config{NodeName: cfg.hostname, Rules: rulesConfig(cfg, nil, nil), IPVersions: versions,
		Dataplane: dp, Logger: log, Metrics: daemon.NewMetrics(reg), Routes: rm, EndpointStatus: endpointStatus(status),
		RulesConfig: func(global, node *v3.FelixConfigurationSpec) rules.Config { return rulesConfig(cfg, global, node) }}
	if o.Health != nil {
		dcfg.Heartbeat = func() { o.Health.Heartbeat("calculation") }
		o.Health.Ready(dp.InSync)
	}
	d := daemon.New(dcfg)

	var servers []*http.Server
	if cfg.healthEnabled && o.Health == nil {
		servers = append(servers, healthServer(net.JoinHostPort(cfg.healthHost, strconv.Itoa(cfg.healthPort)), dp))
	}
	if cfg.metricsEnabled {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Addr: net.JoinHostPort(cfg.metricsHost, strconv.Itoa(cfg.metricsPort)),
			Handler: mux, ReadHeaderTimeout: 5 * time.Second})
	}
	for _, srv := range servers {
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server failed", "addr", srv.Addr, "error", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	log.Info("felix starting", "node", cfg.hostname, "datastore", spec.DatastoreType, "ipv6", cfg.ipv6)
	return d.Run(ctx, daemon.NewSyncer(client, d))
}

// healthServer serves Calico's /liveness and /readiness: live while the
// process runs, ready once the dataplane is in sync.
func healthServer(addr string, dp *dataplane.Dataplane) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/liveness", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/readiness", func(w http.ResponseWriter, _ *http.Request) {
		if dp.InSync() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "dataplane not in sync", http.StatusServiceUnavailable)
	})
	return &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
}
