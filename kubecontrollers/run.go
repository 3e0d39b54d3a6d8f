// Package kubecontrollers is Tabby's kube-controllers, the Deployment that
// keeps the Calico datastore in step with Kubernetes, as Calico's
// calico-kube-controllers: configuration (package config), leader election
// on a Lease (package leader: one replica acts), health (package status),
// the node controller with IPAM garbage collection (packages node and
// ipamgc) and, in etcd mode, the policy, namespace, service-account and
// workload-endpoint controllers (package mirror). Run wires them;
// cmd/kube-controllers only reads the process environment.
package kubecontrollers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/kubecontrollers/compactor"
	"github.com/tabbynet/tabby/kubecontrollers/config"
	"github.com/tabbynet/tabby/kubecontrollers/ipamgc"
	"github.com/tabbynet/tabby/kubecontrollers/leader"
	"github.com/tabbynet/tabby/kubecontrollers/mirror"
	"github.com/tabbynet/tabby/kubecontrollers/node"
	"github.com/tabbynet/tabby/kubecontrollers/status"
	"github.com/tabbynet/tabby/lib/pprofmux"
)

// Options wire Run.
type Options struct {
	Env  config.Env
	Kube kubernetes.Interface
	// Dynamic reads Kubernetes resources without typed clients
	// (ClusterNetworkPolicies, mirrored in etcd mode; nil: not mirrored).
	Dynamic dynamic.Interface
	Client  datastore.Client // the Calico datastore (etcd or the Kubernetes API)
	// Etcd, in etcd mode, is the datastore's etcd: the leader compacts
	// its history every etcdV3CompactionPeriod (nil: no compaction).
	Etcd   *etcd.Config
	Status *status.Status
	// Registry receives the metrics [default: a fresh registry].
	Registry *prometheus.Registry
	// ServeMetrics serves /metrics, /liveness and /readiness on the
	// configuration's prometheusMetricsPort (0 there: not served).
	ServeMetrics bool
	Leader       leader.Config
	// HealthInterval between datastore and API server checks [10s].
	HealthInterval time.Duration
	// Now is the IPAM GC's clock [time.Now].
	Now    func() time.Time
	Logger *slog.Logger
	// LogLevel, if set, is the logger's level: set from the merged
	// configuration (LOG_LEVEL, else logSeverityScreen), as Calico's.
	LogLevel *slog.LevelVar
	// OnGCPass, if set, sees each IPAM GC pass (tests).
	OnGCPass func(ipamgc.Result, error)
	// OnLeading, if set, is called with true when this replica's
	// controllers start and false when they have stopped (tests).
	OnLeading func(bool)
	// OnCompact, if set, sees each etcd compaction (tests).
	OnCompact func(rev int64)
}

// Run runs kube-controllers until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Status == nil {
		o.Status = status.New("")
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 10 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	st := o.Status
	st.SetReady("Startup", false, "loading the configuration")

	var loaded config.Loaded
	for {
		var err error
		loaded, err = config.Load(ctx, o.Client, o.Env)
		if err == nil {
			break
		}
		st.SetReady("Startup", false, err.Error())
		log.Error("loading the configuration (retrying in 5s)", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	st.SetReady("Startup", true, "")
	rc := loaded.Run
	if o.LogLevel != nil {
		o.LogLevel.Set(rc.LogLevel)
	}
	log.Info("configuration loaded", "datastore", o.Env.DatastoreType, "controllers", enabledNames(rc.Controllers),
		"leakGracePeriod", leakGrace(rc), "metricsPort", rc.PrometheusPort, "health", rc.HealthEnabled)

	var wg sync.WaitGroup
	defer wg.Wait()
	if rc.HealthEnabled {
		wg.Go(func() { healthLoop(ctx, o) })
	}
	m := newMetrics(o.Registry)
	if o.ServeMetrics && rc.PrometheusPort != 0 {
		srv := metricsServer(rc.PrometheusPort, o.Registry, st)
		wg.Go(func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics and health server", "err", err)
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			srv.Close()
		})
	}

	if o.ServeMetrics && rc.DebugProfilePort != 0 {
		// Calico's debugProfilePort: Go's profiles on /debug/pprof/.
		srv := &http.Server{Addr: fmt.Sprintf(":%d", rc.DebugProfilePort), Handler: pprofmux.New(), ReadHeaderTimeout: 10 * time.Second}
		wg.Go(func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("debug profile server", "err", err)
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			srv.Close()
		})
	}

	return leader.Run(ctx, o.Kube, o.Leader, func(lctx context.Context) {
		if o.OnLeading != nil {
			o.OnLeading(true)
			defer o.OnLeading(false)
		}
		for lctx.Err() == nil {
			cur, err := config.Load(lctx, o.Client, o.Env)
			if err != nil {
				log.Error("reloading the configuration (retrying in 5s)", "err", err)
				select {
				case <-lctx.Done():
				case <-time.After(5 * time.Second):
				}
				continue
			}
			cctx, cancel := context.WithCancel(lctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				if err := runControllers(cctx, o, cur.Run, m); err != nil {
					log.Error("starting the controllers", "err", err)
				}
			}()
			waitForChange(lctx, o, cur)
			cancel()
			<-done
		}
	})
}

// waitForChange returns when the configuration that runs changed, or ctx
// ended. A failed watch (datastore down, history compacted) is followed by
// a reload: the controllers keep running unless what runs differs.
func waitForChange(ctx context.Context, o Options, cur config.Loaded) {
	for ctx.Err() == nil {
		err := config.WaitForChange(ctx, o.Client, o.Env, cur)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			o.Logger.Warn("watching the configuration; reading it again", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		next, lerr := config.Load(ctx, o.Client, o.Env)
		switch {
		case lerr != nil:
			o.Logger.Error("reading the configuration (the controllers keep running)", "err", lerr)
		case !reflect.DeepEqual(next.Run, cur.Run):
			o.Logger.Info("configuration changed: restarting the controllers")
			return
		default:
			cur = next
		}
	}
}

// metrics shared by every (re)start of the controllers.
type metrics struct {
	gc     *ipamgc.Metrics
	mirror *mirror.Metrics
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{gc: ipamgc.NewMetrics(reg), mirror: mirror.NewMetrics(reg)}
}

// runControllers runs the enabled controllers until ctx ends.
func runControllers(ctx context.Context, o Options, rc config.RunConfig, m *metrics) error {
	log := o.Logger
	factory := informers.NewSharedInformerFactory(o.Kube, 0)
	defer factory.Shutdown()
	var runs []func(context.Context)
	c := rc.Controllers
	if n := c.Node; n != nil {
		nodes := factory.Core().V1().Nodes()
		gcfg := ipamgc.Config{Client: o.Client, Grace: n.LeakGracePeriod, Now: o.Now, Logger: log.With("controller", "ipam-gc"), Metrics: m.gc,
			Allocator: ipam.New(o.Client, ipam.Config{Now: o.Now, Logger: log.With("controller", "ipam-gc")})}
		if o.Env.Etcd() {
			pods := factory.Core().V1().Pods()
			gcfg.Pods = node.PodOracle{Kube: o.Kube, Pods: pods.Lister()}
			pods.Informer() // registered before Start
		}
		nc, err := node.New(node.Config{Kube: o.Kube, Nodes: nodes, Client: o.Client, GC: ipamgc.New(gcfg),
			DeleteNodes: n.DeleteNodes, SyncLabels: n.SyncLabels && o.Env.Etcd(), Period: n.ReconcilerPeriod, Logger: log, OnPass: o.OnGCPass})
		if err != nil {
			return err
		}
		runs = append(runs, nc.Run)
	}
	if o.Env.Etcd() {
		var specs []mirror.Spec
		if g := c.Policy; g != nil {
			specs = append(specs, mirror.Policy(factory.Networking().V1().NetworkPolicies().Informer(), g.ReconcilerPeriod))
		}
		if g := c.Namespace; g != nil {
			specs = append(specs, mirror.Namespaces(factory.Core().V1().Namespaces().Informer(), g.ReconcilerPeriod))
		}
		if g := c.ServiceAccount; g != nil {
			specs = append(specs, mirror.ServiceAccounts(factory.Core().V1().ServiceAccounts().Informer(), g.ReconcilerPeriod))
		}
		for _, s := range specs {
			mc, err := mirror.New(s, o.Client, m.mirror, log)
			if err != nil {
				return err
			}
			runs = append(runs, mc.Run)
		}
		if g := c.Policy; g != nil && o.Dynamic != nil {
			run, err := clusterPolicyMirror(o, g.ReconcilerPeriod, m.mirror)
			if err != nil {
				return err
			}
			runs = append(runs, run)
		}
		if g := c.WorkloadEndpoint; g != nil {
			ec, err := mirror.NewEndpoints(factory.Core().V1().Pods().Informer(), o.Client, g.ReconcilerPeriod, m.mirror, log)
			if err != nil {
				return err
			}
			runs = append(runs, ec.Run)
		}
	} else if c.Policy != nil || c.Namespace != nil || c.ServiceAccount != nil || c.WorkloadEndpoint != nil {
		// As Calico: in Kubernetes mode these are served straight from the
		// Kubernetes objects, nothing to mirror.
		log.Info("policy, namespace, serviceaccount and workloadendpoint controllers only run with the etcd datastore")
	}
	if o.Etcd != nil && o.Env.Etcd() && rc.EtcdV3CompactionPeriod > 0 {
		cli, err := compactor.Dial(*o.Etcd)
		if err != nil {
			log.Error("etcd compaction not running", "err", err)
		} else {
			runs = append(runs, func(ctx context.Context) {
				defer cli.Close()
				compactor.Run(ctx, cli, rc.EtcdV3CompactionPeriod, log.With("controller", "compactor"), o.OnCompact)
			})
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("informer for %v never synced", typ)
		}
	}
	log.Info("controllers running", "controllers", enabledNames(c))
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { r(ctx) })
	}
	wg.Wait()
	return nil
}

// clusterPolicyMirror runs the ClusterNetworkPolicy mirror (with the
// policy controller) on an informer of its own: the resource is a CRD
// that may not be installed, so the factory's sync does not wait for it.
func clusterPolicyMirror(o Options, period time.Duration, m *mirror.Metrics) (func(context.Context), error) {
	inf := kdd.NewClusterNetworkPolicyInformer(o.Dynamic)
	mc, err := mirror.New(mirror.ClusterPolicy(inf, period), o.Client, m, o.Logger)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { inf.RunWithContext(ctx) })
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			mc.Run(ctx)
		}
	}, nil
}

func enabledNames(c config.Controllers) []string {
	var out []string
	if c.Node != nil {
		out = append(out, "node")
	}
	if c.Policy != nil {
		out = append(out, "policy")
	}
	if c.Namespace != nil {
		out = append(out, "namespace")
	}
	if c.ServiceAccount != nil {
		out = append(out, "serviceaccount")
	}
	if c.WorkloadEndpoint != nil {
		out = append(out, "workloadendpoint")
	}
	return out
}

func leakGrace(rc config.RunConfig) time.Duration {
	if rc.Controllers.Node == nil {
		return 0
	}
	return rc.Controllers.Node.LeakGracePeriod
}

// healthLoop checks, as Calico's, that the Calico datastore answers (a
// read of the KubeControllersConfiguration) and that the API server's
// /healthz says ok.
func healthLoop(ctx context.Context, o Options) {
	st := o.Status
	st.SetReady("CalicoDatastore", false, "not checked yet")
	st.SetReady("KubeAPIServer", false, "not checked yet")
	for {
		cctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		_, err := o.Client.Get(cctx, datastore.Key{Kind: v3.KindKubeControllersConfiguration, Name: config.DefaultName})
		cancel()
		if err != nil && !errors.Is(err, datastore.ErrNotFound) {
			st.SetReady("CalicoDatastore", false, "Error verifying datastore: "+err.Error())
		} else {
			st.SetReady("CalicoDatastore", true, "")
		}
		cctx, cancel = context.WithTimeout(ctx, 4*time.Second)
		code := 0
		res := o.Kube.Discovery().RESTClient().Get().AbsPath("/healthz").Do(cctx).StatusCode(&code)
		cancel()
		if code != http.StatusOK {
			st.SetReady("KubeAPIServer", false, fmt.Sprintf("Error reaching apiserver: %v with http status code: %d", res.Error(), code))
		} else {
			st.SetReady("KubeAPIServer", true, "")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(o.HealthInterval):
		}
	}
}

func metricsServer(port int, reg *prometheus.Registry, st *status.Status) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	h := st.Handler()
	mux.Handle("/liveness", h)
	mux.Handle("/readiness", h)
	return &http.Server{Addr: fmt.Sprintf(":%d", port), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}
