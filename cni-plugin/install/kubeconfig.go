package install

import (
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeconfigName is the plugin's kubeconfig in the CNI config folder.
const KubeconfigName = "calico-kubeconfig"

// Cluster is how the plugin reaches the API server.
type Cluster struct {
	Server   string // e.g. https://[10.96.0.1]:443
	CAData   []byte // PEM; empty with Insecure
	Insecure bool   // SKIP_TLS_VERIFY=true
}

// RenderKubeconfig is the plugin's kubeconfig: the cluster and the token.
func RenderKubeconfig(c Cluster, token string) ([]byte, error) {
	if c.Server == "" {
		return nil, fmt.Errorf("no API server address for the CNI kubeconfig")
	}
	if token == "" {
		return nil, fmt.Errorf("no token for the CNI kubeconfig")
	}
	cfg := clientcmdapi.NewConfig()
	cluster := &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: c.CAData}
	if c.Insecure {
		// client-go refuses a CA together with skipping verification.
		cluster.CertificateAuthorityData, cluster.InsecureSkipTLSVerify = nil, true
	}
	cfg.Clusters["local"] = cluster
	cfg.AuthInfos["calico"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["calico-context"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "calico"}
	cfg.CurrentContext = "calico-context"
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("rendering the CNI kubeconfig: %w", err)
	}
	return out, nil
}

// WriteKubeconfig replaces path with the plugin's kubeconfig, mode 0600.
func WriteKubeconfig(path string, c Cluster, token string) error {
	data, err := RenderKubeconfig(c, token)
	if err != nil {
		return err
	}
	return WriteFileAtomic(path, data, 0o600)
}
