package kdd

import (
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// FromSpec builds a client from a component's datastore configuration.
// Binaries that support the Kubernetes datastore pass it as
// dsconfig.Backends.Kubernetes.
func FromSpec(s dsconfig.Spec) (datastore.Client, error) {
	rc, err := RESTConfig(s)
	if err != nil {
		return nil, err
	}
	return New(Config{REST: rc, QPS: s.K8sClientQPS, Burst: s.K8sClientBurst, RequestTimeout: s.RequestTimeout,
		OneConnection: s.OneCall, TLSSessionFile: s.TLSSessionFile})
}

// RESTConfig resolves Calico's KubeConfig settings as libcalico-go does:
// the kubeconfig (a path, else kubeconfigInline's content, else
// $KUBECONFIG/~/.kube/config, else the in-cluster service account), its
// context chosen by k8sCurrentContext, then k8sAPIEndpoint, k8sCAFile,
// k8sInsecureSkipTLSVerify, k8sCertFile/k8sKeyFile and k8sAPIToken laid
// over it (so k8sAPIEndpoint with a token or certificate needs no
// kubeconfig). calicoAPIGroup other than crd.projectcalico.org/v1 (the
// projectcalico.org/v3 aggregated API) is refused: Tabby reads Calico's
// CRDs directly.
func RESTConfig(s dsconfig.Spec) (*rest.Config, error) {
	if g := s.CalicoAPIGroup; g != "" && !strings.EqualFold(g, "crd.projectcalico.org/v1") {
		return nil, fmt.Errorf("calicoAPIGroup %q is not supported: Tabby reads Calico's CRDs (crd.projectcalico.org/v1) directly, not the projectcalico.org/v3 API server", g)
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: s.K8sCurrentContext}
	overrides.ClusterInfo.Server = s.K8sAPIEndpoint
	overrides.ClusterInfo.CertificateAuthority = s.K8sCAFile
	overrides.ClusterInfo.InsecureSkipTLSVerify = s.K8sInsecureSkipTLSVerify
	overrides.AuthInfo.ClientCertificate = s.K8sCertFile
	overrides.AuthInfo.ClientKey = s.K8sKeyFile
	overrides.AuthInfo.Token = s.K8sAPIToken
	var cc clientcmd.ClientConfig
	switch {
	case s.Kubeconfig == "" && s.KubeconfigInline != "":
		raw, err := clientcmd.Load([]byte(s.KubeconfigInline))
		if err != nil {
			return nil, fmt.Errorf("kubeconfigInline: %w", err)
		}
		cc = clientcmd.NewNonInteractiveClientConfig(*raw, s.K8sCurrentContext, overrides, nil)
	case s.Kubeconfig == "" && s.K8sAPIEndpoint != "":
		// Only the endpoint and its credentials (Calico's k8sAPIEndpoint
		// with k8sAPIToken or client certificates).
		rc := &rest.Config{Host: s.K8sAPIEndpoint, BearerToken: s.K8sAPIToken,
			TLSClientConfig: rest.TLSClientConfig{CAFile: s.K8sCAFile, CertFile: s.K8sCertFile, KeyFile: s.K8sKeyFile, Insecure: s.K8sInsecureSkipTLSVerify}}
		return rc, nil
	default:
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = s.Kubeconfig
		cc = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes datastore: no usable kubeconfig (set kubeconfig / KUBECONFIG, kubeconfigInline, or k8sAPIEndpoint with credentials, or run in a pod): %w", err)
	}
	return rc, nil
}
