// Package daemon wires Typha: one datastore syncer per syncer type (felix's
// kinds, confd's "bgp" kinds) feeding one snapcache each, the sync server on
// TYPHA_SERVERPORT (5473), health (/liveness, /readiness) on
// TYPHA_HEALTHPORT (9098) and Prometheus metrics on
// TYPHA_PROMETHEUSMETRICSPORT (9093), as Calico's Typha.
package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"

	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/datastore/kdd/clientset"
	felixdaemon "github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/staged"
	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/syncserver"
	"github.com/tabbynet/tabby/typha/tlsconfig"
)

// Version is what Typha says in its hello.
const Version = "tabby"

// FelixKinds are the kinds of the felix stream over c: felix's, with the
// staged policies its flow logs read (a felix without flow logs drops
// them: syncclient.Config.Kinds).
func FelixKinds(c datastore.Client) []string {
	return append(slices.Clone(felixdaemon.SyncKinds(c)), staged.Kinds...)
}

// Streams are the syncer types Typha serves over c, and their kinds.
func Streams(c datastore.Client) map[syncproto.SyncerType][]string {
	return map[syncproto.SyncerType][]string{
		syncproto.SyncerTypeFelix: FelixKinds(c),
		syncproto.SyncerTypeBGP:   confd.Kinds,
	}
}

// Options is what Run needs.
type Options struct {
	Config   Config
	Client   datastore.Client
	Log      *slog.Logger
	Registry *prometheus.Registry
	// Listener, if set, replaces listening on Config.ListenAddr (tests).
	Listener net.Listener
	// Ready, if set, is called with the server's address once it listens.
	Ready func(addr string)
	// Kube is the Kubernetes API rebalancing reads (the Kubernetes
	// datastore's own client when nil).
	Kube kubernetes.Interface
}

// ErrRebalanceNeedsKubernetes: kubernetes rebalancing without the
// Kubernetes API.
var ErrRebalanceNeedsKubernetes = errors.New("TYPHA_CONNECTIONREBALANCINGMODE=kubernetes needs the Kubernetes API (the Kubernetes datastore, KUBECONFIG or in-cluster)")

// Run runs Typha until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	rb := o.Config.Rebalance
	if o.Kube == nil && rb.Mode == "kubernetes" {
		kube, err := clientset.Of(o.Client)
		if err != nil {
			return err
		}
		o.Kube = kube
	}
	if rb.Mode == "kubernetes" && o.Kube == nil {
		return ErrRebalanceNeedsKubernetes
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l, err := listen(o)
	if err != nil {
		return err
	}
	caches := map[syncproto.SyncerType]*snapcache.Cache{}
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cm := newCacheMetrics(o.Registry)
	for st, kinds := range Streams(o.Client) {
		cache := snapcache.New(string(st), time.Now, o.Log.With("syncer", string(st)), cm.forSyncer(string(st)))
		caches[st] = cache
		syncer := newSyncer(o.Client, kinds, cache)
		wg.Add(1)
		go func() { defer wg.Done(); syncer.Run(ctx) }()
	}
	sc := o.Config
	srv := syncserver.New(caches, syncserver.Config{MaxMessageSize: sc.MaxMessageSize, PingInterval: sc.PingInterval,
		PongTimeout: sc.PongTimeout, HandshakeTimeout: sc.HandshakeTimeout, MaxFallBehind: sc.MaxFallBehind,
		MaxConns: rb.MaxConnsUpper, DropInterval: rb.DropInterval, ShutdownTimeout: rb.ShutdownTimeout,
		ShutdownMaxDropInterval: rb.ShutdownMaxDropInterval, Version: Version, Log: o.Log, Registerer: o.Registry})
	if rb.Mode == "kubernetes" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rebalance(ctx, rb, o.Kube, caches[syncproto.SyncerTypeFelix], len(caches), srv, o.Log.With("thread", "k8s-poll"))
		}()
	}
	stopHTTP, err := startHTTP(ctx, o, caches)
	if err != nil {
		l.Close()
		return err
	}
	defer stopHTTP()
	o.Log.Info("Typha listening", "addr", l.Addr().String(), "tls", sc.TLS.Set())
	if o.Ready != nil {
		o.Ready(l.Addr().String())
	}
	return srv.Serve(ctx, l)
}

// newSyncer is the datastore syncer for one stream: kdd's informers on the
// Kubernetes datastore, the watch syncer otherwise (as felix and confd
// without Typha).
func newSyncer(c datastore.Client, kinds []string, cb datastore.SyncerCallbacks) datastore.Syncer {
	if kc, ok := c.(*kdd.Client); ok {
		return kdd.NewSyncer(kc, kinds, cb)
	}
	return datastore.NewWatchSyncer(c, kinds, cb, datastore.DefaultBackoff)
}

func listen(o Options) (net.Listener, error) {
	l := o.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", o.Config.ListenAddr()); err != nil {
			return nil, fmt.Errorf("listening for Typha clients: %w", err)
		}
	}
	if !o.Config.TLS.Set() {
		return l, nil
	}
	tc, err := tlsconfig.Server(o.Config.TLS)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("Typha TLS (TYPHA_SERVERCERTFILE, TYPHA_SERVERKEYFILE, TYPHA_CAFILE, TYPHA_CLIENTCN/TYPHA_CLIENTURISAN): %w", err)
	}
	return tls.NewListener(l, tc), nil
}

// startHTTP serves health and metrics as configured.
func startHTTP(ctx context.Context, o Options, caches map[syncproto.SyncerType]*snapcache.Cache) (func(), error) {
	var servers []*http.Server
	stop := func() {
		for _, s := range servers {
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = s.Shutdown(sctx)
			cancel()
		}
	}
	serve := func(addr string, h http.Handler) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
		servers = append(servers, s)
		go func() {
			if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				o.Log.Error("HTTP server stopped", "addr", addr, "error", err)
			}
		}()
		return nil
	}
	c := o.Config
	if c.HealthEnabled {
		if err := serve(joinHostPort(c.HealthHost, c.HealthPort), healthHandler(caches)); err != nil {
			stop()
			return nil, fmt.Errorf("health port: %w", err)
		}
	}
	if c.PrometheusMetricsEnabled {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(o.Registry, promhttp.HandlerOpts{}))
		if err := serve(joinHostPort(c.PrometheusMetricsHost, c.PrometheusMetricsPort), mux); err != nil {
			stop()
			return nil, fmt.Errorf("metrics port: %w", err)
		}
	}
	return stop, nil
}

// healthHandler: live while serving; ready once every stream is in sync
// with the datastore.
func healthHandler(caches map[syncproto.SyncerType]*snapcache.Cache) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/liveness", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/readiness", func(w http.ResponseWriter, _ *http.Request) {
		var notReady []string
		for st, c := range caches {
			if c.Status() != syncproto.StatusInSync {
				notReady = append(notReady, string(st))
			}
		}
		if len(notReady) > 0 {
			slices.Sort(notReady)
			http.Error(w, fmt.Sprintf("not in sync with the datastore: %v", notReady), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
