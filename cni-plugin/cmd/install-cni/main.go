// Command install-cni installs the calico CNI plugin on a node, as
// Calico's install-cni init container: the binaries into /opt/cni/bin,
// 10-calico.conflist rendered from CNI_NETWORK_CONFIG, and, in a pod, the
// plugin's kubeconfig with a calico-cni-plugin token from the TokenRequest
// API. With SLEEP=true (Calico's default) it then stays up and refreshes
// that token long before it expires; the manifests run it with
// SLEEP=false and let calico-node refresh the token.
//
// Calico's environment: CNI_CONF_NAME, CNI_NET_DIR, CNI_NETWORK_CONFIG,
// CNI_NETWORK_CONFIG_FILE, CNI_MTU, KUBERNETES_NODE_NAME, DATASTORE_TYPE,
// ETCD_ENDPOINTS, ETCD_DISCOVERY_SRV, LOG_LEVEL, LOG_FILE_PATH,
// SKIP_CNI_BINARIES, UPDATE_CNI_BINARIES, TLS_ASSETS_DIR, SLEEP,
// KUBERNETES_SERVICE_HOST/_PORT/_PROTOCOL, SKIP_TLS_VERIFY,
// CALICO_CNI_SERVICE_ACCOUNT. Outside a pod, KUBECONFIG names the
// cluster to request the token from.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/cni-plugin/install"
	"github.com/tabbynet/tabby/lib/calicolog"
)

func main() {
	log := slog.New(calicolog.New(os.Stderr, calicolog.Options{Component: "cni-installer", JSON: calicolog.JSONFromEnv(os.Getenv)}))
	if err := run(log); err != nil {
		log.Error("install-cni failed", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := install.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	flag.StringVar(&cfg.SourceDir, "source-dir", cfg.SourceDir, "the CNI binaries to install (the image's /opt/cni/bin)")
	flag.StringVar(&cfg.BinDir, "bin-dir", cfg.BinDir, "the host's /opt/cni/bin, as mounted")
	flag.StringVar(&cfg.NetDir, "net-dir", cfg.NetDir, "the host's /etc/cni/net.d, as mounted")
	validity := flag.Duration("token-validity", install.DefaultTokenValidity, "the lifetime of the CNI plugin's tokens (at least 10m)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	kube, err := install.KubeFromEnv(os.Getenv, *validity, log)
	if err != nil {
		return err
	}
	if kube == nil {
		log.Info("not running in a pod and no KUBECONFIG: no kubeconfig is written for the plugin")
	}
	if err := install.Install(ctx, cfg, kube, log); err != nil {
		return err
	}
	if !cfg.Sleep || kube == nil {
		return nil
	}
	r := kube.Refresher
	r.Kube = kube.Client
	r.Log = log
	r.Write = func(token string, _ time.Time) error {
		return install.WriteKubeconfig(cfg.KubeconfigPath(), kube.Cluster, token)
	}
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// kubeFromEnv builds the API server access: in a pod, its service
// account; else KUBECONFIG; else nil.
