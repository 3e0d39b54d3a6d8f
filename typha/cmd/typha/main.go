// Command typha is Tabby's Typha (Calico's): one set of datastore watches
// fanned out to every node's felix and confd. Configured by Calico's
// TYPHA_* environment (package daemon) and the datastore environment
// (DATASTORE_TYPE, KUBECONFIG, ETCD_ENDPOINTS, ...; TYPHA_DATASTORETYPE
// chooses).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/lib/calicolog"
	"github.com/tabbynet/tabby/typha/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "typha:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	cfg, err := daemon.FromEnv(getenv)
	if err != nil {
		return err
	}
	log := slog.New(calicolog.New(os.Stderr, calicolog.Options{Component: "typha", Level: level(cfg.LogSeverityScreen), JSON: calicolog.JSONFromEnv(getenv)}))
	slog.SetDefault(log)
	klog.SetSlogLogger(log)
	dsenv := func(k string) string {
		if k == "DATASTORE_TYPE" {
			return cfg.DatastoreType
		}
		if v := getenv("TYPHA_" + strings.ReplaceAll(k, "_", "")); v != "" && strings.HasPrefix(k, "ETCD_") {
			return v // TYPHA_ETCDENDPOINTS, TYPHA_ETCDKEYFILE, ...
		}
		return getenv(k)
	}
	spec, err := dsconfig.Load(dsconfig.DefaultConfigFile, false, dsenv)
	if err != nil {
		return err
	}
	client, err := dsconfig.Backends{Kubernetes: kdd.FromSpec, EtcdTransport: etcdlib.New}.New(spec)
	if err != nil {
		return fmt.Errorf("connecting to the datastore: %w", err)
	}
	defer client.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	o := daemon.Options{Config: cfg, Client: client, Log: log, Registry: reg}
	if _, isKDD := client.(*kdd.Client); cfg.Rebalance.Mode == "kubernetes" && !isKDD {
		if o.Kube, err = kubeFromEnv(getenv); err != nil {
			return fmt.Errorf("%w: %v", daemon.ErrRebalanceNeedsKubernetes, err)
		}
	}
	return daemon.Run(ctx, o)
}

// kubeFromEnv is the Kubernetes API from KUBECONFIG, or in-cluster.
func kubeFromEnv(getenv func(string) string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", getenv("KUBECONFIG"))
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// level maps Calico's severities.
func level(s string) slog.Level {
	switch strings.ToUpper(s) {
	case "DEBUG":
		return slog.LevelDebug
	case "WARNING", "WARN":
		return slog.LevelWarn
	case "ERROR", "CRITICAL", "FATAL", "PANIC":
		return slog.LevelError
	}
	return slog.LevelInfo
}
