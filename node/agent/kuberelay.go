package agent

import (
	"log/slog"

	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/node/kuberelay"
)

// envKubeRelay names the socket where calico-node serves the CNI plugin's
// relay of the Kubernetes API (node/kuberelay); the manifests set it to
// the plugin's default, dsconfig.DefaultKubeRelay. Unset: no relay (the
// plugin then talks to the API server itself).
const envKubeRelay = "TABBY_CNI_KUBE_RELAY"

// kubeRelay is the relay to run on the Kubernetes datastore, or nil (and
// why not).
func kubeRelay(getenv func(string) string, spec dsconfig.Spec, node string, log *slog.Logger) (*kuberelay.Relay, string, error) {
	socket := getenv(envKubeRelay)
	switch {
	case spec.DatastoreType != dsconfig.TypeKubernetes:
		return nil, "not on the Kubernetes datastore", nil
	case socket == "":
		return nil, envKubeRelay + " is not set", nil
	}
	rc, err := kdd.RESTConfig(spec)
	if err != nil {
		return nil, "", err
	}
	r, err := kuberelay.New(kuberelay.Config{REST: rc, Node: node, Socket: socket, Log: log})
	return r, "", err
}
