package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tabbynet/tabby/cni-plugin/install"
)

// DefaultCNIKubeconfig is where calico-node keeps the CNI plugin's
// kubeconfig (the host's /etc/cni/net.d as the DaemonSet mounts it;
// TABBY_CNI_KUBECONFIG, not Calico's, moves it for tests).
const DefaultCNIKubeconfig = "/host/etc/cni/net.d/" + install.KubeconfigName

// cniTokenRefresher is the refresher of the CNI plugin's token, as
// Calico's calico-node runs it unless CALICO_MANAGE_CNI=false: nil (and
// the reason) when calico-node runs outside Kubernetes or the CNI config
// folder is not mounted. install-cni wrote the first token; this keeps it
// fresh.
func cniTokenRefresher(getenv func(string) string, kube *install.Kube, log *slog.Logger) (*install.TokenRefresher, string) {
	if log == nil {
		log = slog.Default()
	}
	if getenv("CALICO_MANAGE_CNI") == "false" {
		return nil, "CALICO_MANAGE_CNI=false"
	}
	path := getenv("TABBY_CNI_KUBECONFIG")
	if path == "" {
		path = DefaultCNIKubeconfig
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return nil, filepath.Dir(path) + " is not mounted"
	}
	if kube == nil {
		return nil, "not in a pod and no KUBECONFIG"
	}
	r := kube.Refresher
	r.Kube, r.Log = kube.Client, log
	r.Write = func(token string, _ time.Time) error { return install.WriteKubeconfig(path, kube.Cluster, token) }
	return &r, ""
}

// runTokenRefresher runs r until ctx ends.
func runTokenRefresher(ctx context.Context, r *install.TokenRefresher) error {
	if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
