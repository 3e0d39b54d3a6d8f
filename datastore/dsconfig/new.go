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

// NewEtcdTransport is the etcd connection of the binaries that set it:
// long-running components set etcdlib.New (etcd's client library); left
// nil, the hand-written transport is used (the CNI plugin, whose
// once-per-pod start must not pay for grpc-go's initialisation).
var NewEtcdTransport etcd.NewTransportFunc

// EtcdConfig is the etcd client configuration the spec describes.
func (s Spec) EtcdConfig() etcd.Config {
	return etcd.Config{
		Endpoints: s.Endpoints(), DiscoverySrv: s.EtcdDiscoverySrv,
		TLS: etcd.TLSFiles{
			CAFile: s.EtcdCACertFile, CertFile: s.EtcdCertFile, KeyFile: s.EtcdKeyFile,
			CA: s.EtcdCACert, Cert: s.EtcdCert, Key: s.EtcdKey,
		},
		Username: s.EtcdUsername, Password: s.EtcdPassword,
		RequestTimeout: s.RequestTimeout, NewTransport: NewEtcdTransport,
	}
}

// New builds the client the spec describes.
func New(s Spec) (datastore.Client, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch s.DatastoreType {
	case TypeEtcdV3:
		return etcd.New(s.EtcdConfig())
	case TypeKubernetes:
		if NewKubernetesClient == nil {
			return nil, fmt.Errorf("the kubernetes datastore is not built into this binary")
		}
		return NewKubernetesClient(s)
	}
	return nil, fmt.Errorf("datastoreType %q is not supported", s.DatastoreType)
}
