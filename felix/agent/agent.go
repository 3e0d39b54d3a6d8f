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
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/dsmetrics"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	felixconfig "github.com/tabbynet/tabby/felix/config"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/felix/health"
	"github.com/tabbynet/tabby/felix/ifacewatch"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/lib/calicolog"
	"github.com/tabbynet/tabby/lib/pprofmux"
)

// Options are what the caller of Run decides; the rest is configuration
// from the environment, felix's config file and the datastore.
type Options struct {
	// Getenv reads the environment (os.Getenv in production).
	Getenv func(string) string
	// Environ lists the environment, to find every FELIX_* variable
	// (os.Environ when Getenv is nil too; otherwise, when nil, only the
	// known settings are read through Getenv).
	Environ func() []string
	// ConfigFile is felix's config file (default /etc/calico/felix.cfg;
	// a missing file is no error).
	ConfigFile string
	// Stderr receives the log when Logger is nil (os.Stderr if nil).
	Stderr io.Writer
	// Logger, when set, is used as is (calico-node shares one); else Run
	// makes one from LogSeverityScreen, LogFilePath and LogSeverityFile
	// and makes it slog's default.
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
	// Ready is given felix's readiness checks, one per part (datastore,
	// dataplane, routes, settings): each says ok, or why not.
	Ready(checks map[string]health.Check)
}

// routeFailureGrace is how long route syncs may keep failing (retried
// with backoff) before felix stops being ready: long enough that a
// transient failure does not flap readiness, short enough that a node
// that cannot route (an IPIP pool on a kernel without ipip) is taken out
// of a rollout within a probe period or two.
const routeFailureGrace = 10 * time.Second

// DebugHandler is implemented by an embedding agent's Health when it
// serves felix's read models on its health port (calico-node does): felix
// hands it the endpoint report (daemon.EndpointReportPath).
type DebugHandler interface {
	Handle(pattern string, h http.Handler)
}

// localSources reads the FELIX_* environment and felix's config file.
func localSources(o Options) (getenv func(string) string, env, file map[string]string, err error) {
	getenv, environ := o.Getenv, o.Environ
	if getenv == nil {
		getenv = os.Getenv
		if environ == nil {
			environ = os.Environ
		}
	}
	if environ != nil {
		env = felixconfig.EnvFrom(environ())
	} else {
		env = map[string]string{}
		for _, p := range felixconfig.Params {
			if v := getenv(p.EnvName()); v != "" {
				env[p.Name] = v
			}
		}
	}
	path := o.ConfigFile
	if path == "" {
		path = felixconfig.DefaultFile
	}
	file, err = felixconfig.LoadFile(path)
	return getenv, env, file, err
}

// Run runs felix until ctx is cancelled (a clean stop returns nil and
// leaves the dataplane in place). It returns an error wrapping
// ErrConfigChanged when a setting applied at start changed (the caller
// exits so that felix is restarted, as Calico's is), and an error at
// start for settings Calico's felix dies on (FELIX_CHAININSERTMODE=bogus).
func Run(ctx context.Context, o Options) error {
	b, err := boot(o)
	if err != nil {
		return err
	}
	if b.logs != nil {
		defer b.logs.Close()
	}
	getenv, env, file, local, log, logs, reg := b.getenv, b.env, b.file, b.local, b.log, b.logs, b.reg
	st := newSettingsState(env, file, log, reg, logs, getenv)
	st.report(local)

	// Long-running: etcd's client library.
	backends := dsconfig.Backends{Kubernetes: kdd.FromSpec, EtcdTransport: etcdlib.New}
	spec, err := dsconfig.Load("/etc/calico/calicoctl.cfg", false, datastoreEnv(getenv, file))
	if err != nil {
		return err
	}
	client, err := backends.New(spec)
	if err != nil {
		return fmt.Errorf("connecting to the datastore: %w", err)
	}
	defer client.Close()
	cfg, ok, err := settle(ctx, st, client, b.cfg.hostname)
	if !ok || err != nil {
		return err
	}
	steadyGC := applyGoRuntime(cfg, log)
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	st.restart = stop
	err = runFelix(runCtx, felixRun{o: o, cfg: cfg, st: st, log: log, reg: reg, client: client, steadyGC: steadyGC,
		datastoreType: string(spec.DatastoreType)})
	if cause := context.Cause(runCtx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// booted is felix's local configuration (environment and config file),
// its logger and its metrics registry: what Run has before the datastore.
type booted struct {
	getenv    func(string) string
	env, file map[string]string
	local     *felixconfig.Settings
	cfg       config
	log       *slog.Logger
	logs      *logOutputs // nil when the caller gave the logger
	reg       *prometheus.Registry
}

// boot reads the local configuration and makes the logger (unless the
// caller gave one) and the registry.
func boot(o Options) (booted, error) {
	var b booted
	var err error
	if b.getenv, b.env, b.file, err = localSources(o); err != nil {
		return b, err
	}
	if b.local, err = felixconfig.Resolve(felixconfig.Sources{Env: b.env, File: b.file}); err != nil {
		return b, err
	}
	if b.cfg, err = fromSettings(b.local, b.getenv); err != nil {
		return b, err
	}
	b.log = o.Logger
	if b.log == nil {
		stderr := o.Stderr
		if stderr == nil {
			stderr = os.Stderr
		}
		var ferr error
		b.log, b.logs, ferr = newLogger(stderr, b.cfg.logScreen, b.cfg.logFilePath, b.cfg.logFile, calicolog.JSONFromEnv(b.getenv))
		slog.SetDefault(b.log)
		// client-go (the Kubernetes datastore's informers) logs through klog.
		klog.SetSlogLogger(b.log)
		if ferr != nil {
			b.log.Error("felix logs to the screen only", "logFilePath", b.cfg.logFilePath, "error", ferr)
		}
	}
	b.reg = o.Registry
	if b.reg == nil {
		b.reg = prometheus.NewRegistry()
	}
	return b, nil
}

// settle waits for the datastore's FelixConfigurations and resolves the
// settings with them; ok is false when ctx ended while waiting.
func settle(ctx context.Context, st *settingsState, client datastore.Client, hostname string) (cfg config, ok bool, err error) {
	global, nodeSpec, err := fetchSpecs(ctx, client, hostname, st.log)
	if err != nil {
		return cfg, false, nil // stopped while waiting for the datastore
	}
	settings, err := st.resolve(global, nodeSpec)
	st.report(settings)
	if err != nil {
		return cfg, false, err
	}
	if cfg, err = fromSettings(settings, st.getenv); err != nil {
		return cfg, false, err
	}
	if st.logs != nil {
		st.logs.screen.Set(calicoLevel(cfg.logScreen))
		st.logs.file.Set(calicoLevel(cfg.logFile))
	}
	st.current, st.cfg, st.global, st.node = settings, cfg, global, nodeSpec
	st.rc = rulesConfig(cfg, settings)
	return cfg, true, nil
}

// felixRun is what runFelix wires together.
type felixRun struct {
	o             Options
	cfg           config
	st            *settingsState
	log           *slog.Logger
	reg           *prometheus.Registry
	client        datastore.Client
	steadyGC      func()
	datastoreType string
	// report is the endpoint report (daemon.Reporter), served with health.
	report *daemon.Reporter
	// bg holds the background goroutines; runFelix waits for them.
	bg *lifetime
}

// runFelix starts the dataplane, the route manager, the interface
// address watcher, the calculation, the health checks and the HTTP
// servers, and runs the calculation until ctx ends.
func runFelix(ctx context.Context, r felixRun) error {
	ctx, cancel := context.WithCancel(ctx)
	r.bg = &lifetime{}
	defer r.bg.end()
	defer cancel()
	cfg, log := r.cfg, r.log
	r.report = daemon.NewReporter(cfg.hostname)
	dp, dpLoop, versions, status, err := newDataplane(ctx, r)
	if err != nil {
		return err
	}
	keys := newKeyPublisher(r.client, cfg.hostname, log)
	rm, closeRoutes, err := newRouteManager(cfg, log, r.reg, keys.Set)
	if err != nil {
		return err
	}
	r.bg.OnStop(closeRoutes)
	r.bg.Go(func() { _ = rm.Run(ctx) })
	r.bg.Go(func() { keys.Run(ctx) })
	calcLoop := health.NewLoop(nil)
	calcHang := hangAfter(ctx, cfg.calcHangAfter, "calculation", log)
	dcfg := daemon.Config{NodeName: cfg.hostname, Rules: r.st.rc, IPVersions: versions,
		Dataplane: dp, Logger: log, Metrics: daemon.NewMetrics(r.reg), Routes: rm, EndpointStatus: endpointStatus(status), Report: r.report,
		RulesConfig: func(global, node *v3.FelixConfigurationSpec) rules.Config {
			calcHang() // within the computation, as Calico's calculation graph hangs
			return r.st.onDatastore(global, node)
		}, Health: calcLoop, FollowServices: daemon.FollowsServices(r.client)}
	if r.o.Health != nil {
		dcfg.Heartbeat = func() { r.o.Health.Heartbeat("calculation") }
	}
	d := daemon.New(dcfg)
	r.bg.Go(func() {
		err := ifacewatch.Watch(ctx, ifacewatch.Config{NetnsPath: cfg.netnsPath, Report: d.OnHostInterfaces, Logger: log})
		if err != nil {
			log.Error("cannot watch the interface addresses; host endpoints by expectedIPs stay unrendered", "error", err)
		}
	})
	stopServers := startHealthAndServers(ctx, r, dp, rm, map[string]*health.Loop{"calculation": calcLoop, "dataplane": dpLoop})
	defer stopServers()
	log.Info("felix starting", "node", cfg.hostname, "datastore", r.datastoreType, "ipv6", cfg.ipv6)
	cb, extra := startFlowLogs(ctx, r, d)
	syncer := daemon.NewSyncer(r.client, cb, extra...)
	if cfg.typha.Enabled() {
		if syncer, err = daemon.NewTyphaSyncer(r.client, cfg.typha, cfg.hostname, log, cb, extra...); err != nil {
			return err
		}
		log.Info("following the datastore through Typha", "addr", cfg.typha.Addr, "service", cfg.typha.K8sServiceName, "namespace", cfg.typha.K8sNamespace)
	}
	return d.Run(ctx, syncer)
}

// newDataplane makes the iptables/ipset dataplane (and the endpoint
// status reporter it tells what it applied): its backend found, the other
// backend cleaned, its metrics registered.
func newDataplane(ctx context.Context, r felixRun) (*dataplane.Dataplane, *health.Loop, []int, *epstatus.Reporter, error) {
	cfg, log := r.cfg, r.log
	runner := dataplane.ExecRunner{NetnsPath: cfg.netnsPath}
	v4, v6, err := dataplane.BackendsFor(ctx, runner, cfg.iptablesBackend)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	dpLoop := health.NewLoop(nil)
	var dpRunner dataplane.Runner = runner
	if cfg.dataplaneHangAfter > 0 {
		dpRunner = hangingRunner{Runner: runner, hang: hangAfter(ctx, cfg.dataplaneHangAfter, "dataplane", log)}
	}
	dpCfg := dataplane.Config{Runner: dpRunner, V4: v4, RefreshInterval: cfg.refreshInterval, Logger: log,
		Health: dpLoop, AppendHooks: cfg.chainAppend, OnProgrammed: r.report.Applied}
	if err := chooseDataplaneMode(ctx, r, runner, v4, &dpCfg); err != nil {
		return nil, nil, nil, nil, err
	}
	versions := []int{4}
	if cfg.ipv6 {
		dpCfg.V6 = v6
		versions = append(versions, 6)
	}
	if cfg.goMetrics {
		r.reg.MustRegister(collectors.NewGoCollector())
	}
	if cfg.processMetrics {
		r.reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	dpCfg.Metrics = dataplane.NewMetrics(r.reg)
	if err := dsmetrics.Register(r.reg); err != nil {
		return nil, nil, nil, nil, err
	}
	var status *epstatus.Reporter
	if cfg.statusPrefix != "" {
		status = epstatus.NewReporter(cfg.statusPrefix, log)
		dpCfg.OnApplied = status.Applied
		r.bg.Go(func() { _ = status.Run(ctx) })
	}
	if r.o.Health != nil {
		dpCfg.Heartbeat = func() { r.o.Health.Heartbeat("dataplane") }
	}
	return dataplane.New(dpCfg), dpLoop, versions, status, nil
}

// startHealthAndServers starts the datastore probe, the health checker
// (served, or handed to the embedding agent), the metrics and debug
// servers, and the return of the start-up's memory once the dataplane is
// in sync; it returns what shuts the servers down.
func startHealthAndServers(ctx context.Context, r felixRun, dp *dataplane.Dataplane, rm *routes.Manager, loops map[string]*health.Loop) (stop func()) {
	cfg, log := r.cfg, r.log
	dsProbe := &health.Probe{Name: "datastore", Interval: 10 * time.Second, Log: log, Probe: func(ctx context.Context) error {
		_, err := r.client.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: "default"})
		if errors.Is(err, datastore.ErrNotFound) {
			return nil
		}
		return err
	}}
	r.bg.Go(func() { dsProbe.Run(ctx) })
	// released: the first sync's memory has gone back to the system
	// (releaseStartupMemory); felix is ready only then, so that what it
	// holds when ready is what it needs.
	var released atomic.Bool
	checks := map[string]health.Check{
		"datastore": dsProbe.Check,
		"dataplane": func() (bool, string) {
			if ok, why := dp.Ready(); !ok {
				return false, why
			}
			if !released.Load() {
				return false, "in sync; returning the start-up's memory"
			}
			return true, ""
		},
		"routes":   func() (bool, string) { return rm.Ready(time.Now(), routeFailureGrace) },
		"settings": r.st.Ready,
	}
	checker := &health.Checker{Timeout: cfg.watchdogTimeout, Log: log, Loops: loops, Ready: checks}
	if dh, ok := r.o.Health.(DebugHandler); ok {
		dh.Handle(daemon.EndpointReportPath, r.report)
	}
	if r.o.Health != nil {
		// The embedding agent serves health, one line per part; felix's
		// loops tick the agent's heartbeats.
		r.o.Health.Ready(checks)
	}
	r.bg.Go(func() {
		releaseStartupMemory(ctx, dp.InSync, r.steadyGC, log)
		released.Store(true)
	})
	return serve(httpServers(cfg, checker, r.reg, r.report, r.o.Health == nil), log)
}

// httpServers are felix's health (with the endpoint report; unless the
// embedding agent serves it), metrics and debug (Calico's DebugPort: Go's
// profiling handlers) servers, as configured.
func httpServers(cfg config, checker *health.Checker, reg *prometheus.Registry, report http.Handler, ownHealth bool) []*http.Server {
	var servers []*http.Server
	add := func(host string, port int, h http.Handler) {
		servers = append(servers, &http.Server{Addr: net.JoinHostPort(host, strconv.Itoa(port)), Handler: h, ReadHeaderTimeout: 5 * time.Second})
	}
	if cfg.healthEnabled && ownHealth {
		mux := http.NewServeMux()
		checker.Register(mux)
		mux.Handle(daemon.EndpointReportPath, report)
		add(cfg.healthHost, cfg.healthPort, mux)
	}
	if cfg.metricsEnabled {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		add(cfg.metricsHost, cfg.metricsPort, mux)
	}
	if cfg.debugPort != 0 {
		add(cfg.debugHost, cfg.debugPort, pprofmux.New())
	}
	return servers
}

// serve starts the servers; the function returned shuts them down.
func serve(servers []*http.Server, log *slog.Logger) (stop func()) {
	for _, srv := range servers {
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server failed", "addr", srv.Addr, "error", err)
			}
		}()
	}
	return func() {
		for _, srv := range servers {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = srv.Shutdown(sctx)
			cancel()
		}
	}
}

// startupGCPercent is the garbage collector's target while felix starts
// (until the dataplane is first in sync) when GoGCThreshold is lower.
// Calico's default threshold, 40, keeps the steady heap small, but while
// the snapshot is loaded into a growing heap it makes the collector run
// five times as often as this. At 150,000 endpoints (make bench-scale,
// alternating runs) 40 made the start take ~1.25x as long as 200 and 100
// ~1.07x; the peak before the start-up's memory is returned is ~480 MiB
// at 40, ~585 MiB at 100 and ~700 MiB at 200.
const startupGCPercent = 200

// applyGoRuntime applies GoGCThreshold (from the end of the start-up on,
// see startupGCPercent), GoMemoryLimitMB and GoMaxProcs (-1: leave the
// runtime's own). It returns what sets the steady-state threshold.
func applyGoRuntime(c config, log *slog.Logger) (steady func()) {
	steady = func() {}
	if c.goGC != -1 {
		debug.SetGCPercent(max(c.goGC, startupGCPercent))
		steady = func() { debug.SetGCPercent(c.goGC) }
	}
	if c.goMemLimit != -1 {
		debug.SetMemoryLimit(int64(c.goMemLimit) << 20)
	}
	if c.goMaxProcs != -1 {
		runtime.GOMAXPROCS(c.goMaxProcs)
	}
	log.Debug("go runtime", "gcPercent", c.goGC, "memoryLimitMB", c.goMemLimit, "maxProcs", c.goMaxProcs)
	return steady
}

// releaseStartupMemory sets the steady garbage collector's threshold and
// returns the memory of the start-up to the operating system once the
// dataplane is first in sync (done): loading the cluster (the decoded
// snapshot, the first ipset and iptables writes) needs far more than
// holding it, and the Go runtime would otherwise give it back only slowly.
func releaseStartupMemory(ctx context.Context, done func() bool, steady func(), log *slog.Logger) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	steady()
	start := time.Now()
	debug.FreeOSMemory()
	log.Info("returned the start-up's memory to the system", "duration", time.Since(start))
}
