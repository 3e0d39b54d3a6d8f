package install

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// saDir is where a pod's ServiceAccount is mounted.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// KubeFromEnv is how install-cni and calico-node reach the API server for
// the plugin's token: in a pod, the pod's ServiceAccount (its namespace is
// the token's); else KUBECONFIG; nil when neither. The plugin's
// kubeconfig names KUBERNETES_SERVICE_HOST/_PORT/_PROTOCOL when set (the
// kubernetes-services-endpoint ConfigMap), SKIP_TLS_VERIFY=true drops the
// CA, and CALICO_CNI_SERVICE_ACCOUNT names the ServiceAccount.
func KubeFromEnv(getenv func(string) string, validity time.Duration, log *slog.Logger) (*Kube, error) {
	if log == nil {
		log = slog.Default()
	}
	var rc *rest.Config
	var err error
	namespace := "kube-system"
	if _, serr := os.Stat(saDir + "/token"); serr == nil {
		if rc, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
		if ns, err := os.ReadFile(saDir + "/namespace"); err == nil && len(strings.TrimSpace(string(ns))) > 0 {
			namespace = strings.TrimSpace(string(ns))
		}
	} else if path := getenv("KUBECONFIG"); path != "" {
		if rc, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, fmt.Errorf("KUBECONFIG %s: %w", path, err)
		}
	} else {
		return nil, nil
	}
	if err := rest.LoadTLSFiles(rc); err != nil {
		return nil, fmt.Errorf("the API server's CA: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	cluster := Cluster{Server: rc.Host, CAData: rc.CAData, Insecure: rc.Insecure}
	if host := getenv("KUBERNETES_SERVICE_HOST"); host != "" {
		proto := getenv("KUBERNETES_SERVICE_PROTOCOL")
		if proto == "" {
			proto = "https"
		}
		cluster.Server = proto + "://" + net.JoinHostPort(host, getenv("KUBERNETES_SERVICE_PORT"))
	}
	if getenv("SKIP_TLS_VERIFY") == "true" {
		cluster.Insecure, cluster.CAData = true, nil
	}
	sa := getenv("CALICO_CNI_SERVICE_ACCOUNT")
	if sa == "" {
		sa = DefaultServiceAccount
	}
	log.Info("the CNI plugin's token comes from the TokenRequest API", "serviceAccount", namespace+"/"+sa, "server", cluster.Server)
	return &Kube{Client: client, Cluster: cluster, Refresher: TokenRefresher{
		Namespace: namespace, ServiceAccount: sa, Validity: validity,
	}}, nil
}
