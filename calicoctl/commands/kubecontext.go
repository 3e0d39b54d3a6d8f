package commands

import (
	"fmt"
	"os"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// WithKubeconfigSettings wraps the Kubernetes backend's constructor so
// calicoctl honours k8sCurrentContext (--context, K8S_CURRENT_CONTEXT)
// and kubeconfigInline: it resolves them into a kubeconfig file the
// backend reads once while connecting. An unknown context is refused.
func WithKubeconfigSettings(next func(dsconfig.Spec) (datastore.Client, error)) func(dsconfig.Spec) (datastore.Client, error) {
	return func(s dsconfig.Spec) (datastore.Client, error) {
		if s.K8sCurrentContext == "" && s.KubeconfigInline == "" {
			return next(s)
		}
		cfg, err := loadKubeconfig(s)
		if err != nil {
			return nil, err
		}
		if s.K8sCurrentContext != "" {
			if _, ok := cfg.Contexts[s.K8sCurrentContext]; !ok {
				return nil, fmt.Errorf("context %q does not exist in the kubeconfig", s.K8sCurrentContext)
			}
			cfg.CurrentContext = s.K8sCurrentContext
		}
		f, err := os.CreateTemp("", "calicoctl-kubeconfig-*")
		if err != nil {
			return nil, fmt.Errorf("writing the resolved kubeconfig: %w", err)
		}
		defer os.Remove(f.Name())
		f.Close()
		if err := clientcmd.WriteToFile(*cfg, f.Name()); err != nil {
			return nil, fmt.Errorf("writing the resolved kubeconfig: %w", err)
		}
		s.Kubeconfig, s.KubeconfigInline, s.K8sCurrentContext = f.Name(), "", ""
		return next(s)
	}
}

func loadKubeconfig(s dsconfig.Spec) (*clientcmdapi.Config, error) {
	if s.KubeconfigInline != "" {
		cfg, err := clientcmd.Load([]byte(s.KubeconfigInline))
		if err != nil {
			return nil, fmt.Errorf("kubeconfigInline: %w", err)
		}
		return cfg, nil
	}
	path := s.Kubeconfig
	if path == "" {
		return nil, fmt.Errorf("k8sCurrentContext needs a kubeconfig (KUBECONFIG or kubeconfigInline)")
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}
