package dsconfig

import (
	"fmt"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
)

// NewKubernetesClient builds the Kubernetes-API client. It is a variable
// so the kdd backend can be linked in by the binaries that need it
// without this package importing client-go.
var NewKubernetesClient func(Spec) (datastore.Client, error)

// New builds the client the spec describes.
func New(s Spec) (datastore.Client, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch s.DatastoreType {
	case TypeEtcdV3:
		if s.EtcdKeyFile != "" || s.EtcdCertFile != "" || s.EtcdCACertFile != "" || s.EtcdUsername != "" {
			return nil, fmt.Errorf("etcd TLS and authentication are not supported yet: use a plain http endpoint")
		}
		return etcd.New(etcd.Config{Endpoints: s.Endpoints(), RequestTimeout: s.RequestTimeout})
	case TypeKubernetes:
		if NewKubernetesClient == nil {
			return nil, fmt.Errorf("the kubernetes datastore is not built into this binary")
		}
		return NewKubernetesClient(s)
	}
	return nil, fmt.Errorf("datastoreType %q is not supported", s.DatastoreType)
}
