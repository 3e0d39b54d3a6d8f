// Command kube-controllers is Tabby's calico-kube-controllers: leader
// elected on the Lease kube-system/calico-kube-controllers, configured by
// the KubeControllersConfiguration "default" and Calico's environment
// (DATASTORE_TYPE, default etcdv3, with ETCD_ENDPOINTS, ETCD_*_FILE, ... or
// kubernetes; ENABLED_CONTROLLERS, LOG_LEVEL, RECONCILER_PERIOD,
// HEALTH_ENABLED, SYNC_NODE_LABELS, COMPACTION_PERIOD, KUBECONFIG). The
// Kubernetes API is reached through KUBECONFIG or the pod's service
// account. Status goes to -status-file for `check-status`; metrics and
// /liveness, /readiness are served on the configuration's
// prometheusMetricsPort. Wiring only: see package kubecontrollers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/kubecontrollers"
	"github.com/tabbynet/tabby/kubecontrollers/config"
	"github.com/tabbynet/tabby/kubecontrollers/leader"
	"github.com/tabbynet/tabby/kubecontrollers/status"
	"github.com/tabbynet/tabby/lib/calicolog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "kube-controllers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("kube-controllers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	statusFile := fs.String("status-file", status.DefaultFile, "file to write status information to (read by check-status)")
	var lc leader.Config
	fs.StringVar(&lc.Namespace, "lease-namespace", leader.DefaultNamespace, "namespace of the leader-election Lease "+leader.DefaultName)
	fs.StringVar(&lc.Identity, "identity", "", "this replica's name in the Lease (default: host name and a random suffix)")
	fs.DurationVar(&lc.LeaseDuration, "lease-duration", 15*time.Second, "how long a Lease not renewed stays the leader's")
	fs.DurationVar(&lc.RenewDeadline, "lease-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it stops acting")
	fs.DurationVar(&lc.RetryPeriod, "lease-retry-period", 2*time.Second, "interval between attempts to acquire or renew the Lease")
	if err := fs.Parse(args); err != nil {
		return err
	}
	env := config.FromEnv(getenv)
	// Info until the configuration is loaded; then LOG_LEVEL or the
	// KubeControllersConfiguration's logSeverityScreen.
	level := new(slog.LevelVar)
	log := slog.New(calicolog.New(stderr, calicolog.Options{Component: "kube-controllers", Level: level, JSON: calicolog.JSONFromEnv(getenv)}))
	lc.Logger = log
	slog.SetDefault(log)
	klog.SetSlogLogger(log)

	// Long-running: etcd's client library.
	backends := dsconfig.Backends{Kubernetes: kdd.FromSpec, EtcdTransport: etcdlib.New}
	dsenv := func(k string) string {
		if k == config.EnvDatastoreType {
			return env.DatastoreType // Calico's kube-controllers default: etcdv3
		}
		return getenv(k)
	}
	spec, err := dsconfig.Load(dsconfig.DefaultConfigFile, false, dsenv)
	if err != nil {
		return err
	}
	client, err := backends.New(spec)
	if err != nil {
		return fmt.Errorf("connecting to the datastore: %w", err)
	}
	defer client.Close()

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = env.Kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubernetes API: no usable kubeconfig (set KUBECONFIG, or run in a pod): %w", err)
	}
	rc.QPS, rc.Burst, rc.UserAgent = 100, 200, "tabby-kube-controllers"
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes API: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes API: %w", err)
	}

	var etcdCfg *etcd.Config
	if spec.DatastoreType == dsconfig.TypeEtcdV3 {
		c := spec.EtcdConfig()
		c.NewTransport = backends.EtcdTransport
		etcdCfg = &c
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	log.Info("kube-controllers starting", "datastore", env.DatastoreType, "statusFile", *statusFile)
	return kubecontrollers.Run(ctx, kubecontrollers.Options{
		Env: env, Kube: kube, Dynamic: dyn, Client: client, Etcd: etcdCfg, Status: status.New(*statusFile),
		Registry: reg, ServeMetrics: true, Logger: log, LogLevel: level,
		Leader: lc,
	})
}
