package kdd

import (
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// FromSpec builds a client from a component's datastore configuration.
// Binaries that support the Kubernetes datastore install it as
// dsconfig.NewKubernetesClient.
func FromSpec(s dsconfig.Spec) (datastore.Client, error) {
	if s.Kubeconfig == "" && s.K8sAPIEndpoint != "" {
		return nil, fmt.Errorf("k8sAPIEndpoint without a kubeconfig is not supported yet: set kubeconfig (KUBECONFIG)")
	}
	return New(Config{Kubeconfig: s.Kubeconfig, RequestTimeout: s.RequestTimeout})
}

// Kubernetes returns the typed clientset the client uses, for callers that
// must touch native objects directly (the CNI plugin annotates pods, as
// Calico's does).
func (c *Client) Kubernetes() kubernetes.Interface { return c.kube }
