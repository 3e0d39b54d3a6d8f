// Package clientset builds client-go's typed clientset over a Kubernetes
// datastore client's connection, credentials and rate limit, for the
// components that use native APIs beyond what the datastore reads
// (felix's and confd's Typha discovery, confd's BGP Secrets, calico-node's
// node conditions). It is apart from package kdd so that binaries which
// need no clientset (the CNI plugin, one process per pod) do not pay for
// its start-up: it registers every API group's types.
package clientset

import (
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
)

// For returns a typed clientset sharing c's HTTP client (so its one
// connection, when it has one) and rate limiter.
func For(c *kdd.Client) (kubernetes.Interface, error) {
	cfg, httpClient := c.NativeConfig()
	kube, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes clientset: %w", err)
	}
	return kube, nil
}

// Of is For when c is a Kubernetes datastore client, and nil (no error)
// for any other datastore.
func Of(c datastore.Client) (kubernetes.Interface, error) {
	kc, ok := c.(*kdd.Client)
	if !ok {
		return nil, nil
	}
	return For(kc)
}
