package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/klog/v2"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/install"
	confdagent "github.com/tabbynet/tabby/confd/agent"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	felixagent "github.com/tabbynet/tabby/felix/agent"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/lib/calicolog"
	"github.com/tabbynet/tabby/node/birdsup"
	"github.com/tabbynet/tabby/node/health"
	"github.com/tabbynet/tabby/node/nodestatus"
	"github.com/tabbynet/tabby/node/registration"
	"github.com/tabbynet/tabby/node/startup"
)

// Version is written to ClusterInformation.spec.calicoVersion (set at
// build time with -ldflags "-X github.com/tabbynet/tabby/node/agent.Version=...").
var Version = "dev"

// Liveness timeouts: a loop that has not turned for this long is stuck
// (each loop turns at least every 10s when idle).
const (
	felixLivenessTimeout = 60 * time.Second
	confdLivenessTimeout = 60 * time.Second
	birdLivenessTimeout  = 60 * time.Second
)

// Options are what the caller of Run decides.
type Options struct {
	// Getenv reads the environment (os.Getenv when nil).
	Getenv func(string) string
	// Stderr receives the log and BIRD's output (os.Stderr when nil).
	Stderr io.Writer
	// Hostname is the last resort for the node name (os.Hostname when
	// empty).
	Hostname string
}

// Run runs calico-node until ctx ends (a planned stop: nil, dataplane
// and routes left in place) or a part fails.
func Run(ctx context.Context, o Options) error {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	stderr := o.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	log := slog.New(calicolog.New(stderr, calicolog.Options{Component: "calico-node", Level: logLevel(getenv), JSON: calicolog.JSONFromEnv(getenv)}))
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	hostname := o.Hostname
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	cfg, err := startup.Load(getenv, hostname, ipv6Supported(getenv))
	if err != nil {
		return err
	}
	paths := PathsFromEnv(getenv)
	log = log.With("node", cfg.NodeName)
	start := time.Now()

	// The health endpoint comes first: probes see "not ready" during
	// startup rather than a refused connection.
	agg := health.NewAggregator(nil)
	fh := newFelixHealth(agg)
	var confdRep, birdRep, bgpRep *health.Reporter
	bird := cfg.Backend == startup.BackendBIRD
	if bird {
		confdRep = agg.Register("confd", confdLivenessTimeout)
		birdRep = agg.Register("bird", birdLivenessTimeout)
		bgpRep = agg.Register("bgp", 0)
	}
	healthSrv := health.NewServer(HealthAddr(getenv), agg)
	debug := &debugHandlers{}
	healthSrv.Handler = debug.wrap(healthSrv.Handler)
	go func() {
		if err := healthSrv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health endpoint failed", "addr", healthSrv.Addr, "error", err)
		}
	}()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = healthSrv.Shutdown(sctx)
	}()

	backends := dsconfig.Backends{Kubernetes: kdd.FromSpec, EtcdTransport: etcdlib.New}
	spec, err := dsconfig.Load(dsconfig.DefaultConfigFile, false, getenv)
	if err != nil {
		return err
	}
	client, err := backends.New(spec)
	if err != nil {
		return fmt.Errorf("connecting to the datastore: %w", err)
	}
	defer client.Close()
	if getenv("WAIT_FOR_DATASTORE") == "true" {
		if err := waitForDatastore(ctx, client, log); err != nil {
			return err
		}
	}
	log.Info("calico-node starting", "version", Version, "backend", cfg.Backend, "datastore", spec.DatastoreType)
	if err := startup.InitDatastore(ctx, client, cfg, Version, spec.DatastoreType == dsconfig.TypeKubernetes, log); err != nil {
		return fmt.Errorf("initialising the datastore: %w", err)
	}
	// As Calico's start-up (ipam UpgradeHost): the node's block affinities
	// written by Calico before v3.31 get the labels per-node reads select
	// them by (the CNI plugin also does, before it claims a block).
	if n, err := ipam.New(client, ipam.Config{Logger: log}).IndexNode(ctx, cfg.NodeName); err != nil {
		return err
	} else if n > 0 {
		log.Info("labelled older block affinities of this node", "count", n)
	}
	regCfg, err := register(ctx, client, cfg, getenv, log)
	if err != nil {
		return err
	}
	if err := startup.WriteNodename(cfg.NodenameFile, cfg.NodeName); err != nil {
		return err
	}
	log.Info("node registered", "nodenameFile", cfg.NodenameFile)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		fail = make(chan error, 8)
	)
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				fail <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	defer wg.Wait()
	defer cancel()

	if keepAddresses(cfg) {
		run("node address detection", func(ctx context.Context) error { return keepRegistered(ctx, client, regCfg, log) })
	}
	if cfg.Backend != startup.BackendNone {
		alloc := ipam.New(client, ipam.Config{CacheTTL: 2 * time.Second, Logger: log})
		run("tunnel addresses", func(ctx context.Context) error {
			registration.KeepTunnels(ctx, client, alloc, cfg.NodeName, tunnelOptions(getenv), log)
			return nil
		})
	}
	env := overlay(getenv, map[string]string{"NODENAME": cfg.NodeName, "FELIX_FELIXHOSTNAME": cfg.NodeName})
	m := newMetrics()
	if bird {
		for _, dir := range []string{filepath.Dir(paths.BIRDConfig), filepath.Dir(paths.BIRDSocket)} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("BIRD's directory: %w", err)
			}
		}
		hang, err := birdHangTimeout(getenv)
		if err != nil {
			return err
		}
		beat := time.Duration(0) // the supervisor's default
		if hang > 0 {
			beat = min(5*time.Second, max(hang/3, time.Second))
		}
		sup := birdsup.New(birdsup.Config{ConfigPath: paths.BIRDConfig, Socket: paths.BIRDSocket, PidFile: paths.BIRDPidFile,
			Stderr: stderr, Logger: log, Heartbeat: birdRep.Heartbeat, HangTimeout: hang, HeartbeatInterval: beat})
		birdRep.SetReadyFunc(func() (bool, string) {
			if up, _ := sup.Running(); !up {
				return false, "BIRD is not running"
			}
			return true, ""
		})
		confdRep.SetReady(false, "no configuration rendered yet")
		m.own = append(m.own, newBIRDCollector(sup, paths.BIRDSocket))
		run("bird", sup.Run)
		run("confd", func(ctx context.Context) error {
			return confdagent.RunWith(ctx, []string{"-bird-config", paths.BIRDConfig, "-bird-socket", paths.BIRDSocket}, env, stderr,
				confdagent.Hooks{Control: sup, Logger: log.With("component", "confd"), Heartbeat: confdRep.Heartbeat, OnSync: func(err error) {
					if err != nil {
						m.confdSyncs.WithLabelValues("error").Inc()
						confdRep.SetReady(false, err.Error())
						return
					}
					m.confdSyncs.WithLabelValues("ok").Inc()
					confdRep.SetReady(true, "")
				}})
		})
		bgpRep.SetReadyFunc((&bgpChecker{socket: paths.BIRDSocket, start: start}).ready)
	}
	// felix starts once calico-node's collectors are all made (each run's
	// registry holds them); it restarts in-process on a start-time setting.
	felixLog := log.With("component", "felix")
	run("felix", func(ctx context.Context) error {
		return superviseFelix(ctx, func(ctx context.Context) error {
			return felixagent.Run(ctx, felixagent.Options{Getenv: env, Logger: felixLog, Health: felixPort{fh, debug}, Registry: m.felixRegistry()})
		}, fh, log)
	})
	// On Kubernetes (in a pod, or with KUBECONFIG): the CNI plugin's token
	// and the node's NetworkUnavailable condition, as Calico's.
	kube, err := install.KubeFromEnv(getenv, install.DefaultTokenValidity, log)
	if err != nil {
		return err
	}
	if tr, why := cniTokenRefresher(getenv, kube, log.With("component", "cni-token")); tr != nil {
		run("CNI token refresher", func(ctx context.Context) error { return runTokenRefresher(ctx, tr) })
	} else {
		log.Info("not refreshing the CNI plugin's token", "reason", why)
	}
	if kube != nil && cfg.Backend != startup.BackendNone {
		k8sNode := cfg.NodeName
		if cfg.K8sNodeRef != "" {
			k8sNode = cfg.K8sNodeRef
		}
		run("node condition", func(ctx context.Context) error { return manageNodeCondition(ctx, agg, kube.Client, k8sNode, log) })
	}
	rep := &nodestatus.Reporter{Client: client, Node: cfg.NodeName, Socket: paths.BIRDSocket, Logger: log.With("component", "status-reporter")}
	run("node status reporter", rep.Run)
	select {
	case <-ctx.Done():
		log.Info("calico-node stopping; the dataplane stays in place")
		return nil
	case err := <-fail:
		log.Error("calico-node failed", "error", err)
		return err
	}
}

// waitForDatastore retries until the datastore answers (WAIT_FOR_DATASTORE=
// true): a Get of ClusterInformation, found or not (calico-node may get
// but not list it).
func waitForDatastore(ctx context.Context, c datastore.Client, log *slog.Logger) error {
	for {
		_, err := c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
		if err == nil || errors.Is(err, datastore.ErrNotFound) {
			return nil
		}
		log.Warn("waiting for the datastore", "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
