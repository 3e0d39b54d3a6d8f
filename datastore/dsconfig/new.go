package dsconfig

import (
	"fmt"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
)

// Backends are the datastore implementations a binary links in. Each
// main (or agent) builds its value once and passes it on; nothing here is
// package state, so agents that share a process (calico-node runs felix
// and confd together) cannot race on it.
type Backends struct {
	// Kubernetes builds the Kubernetes-API client (kdd.FromSpec). nil:
	// the kubernetes datastore is not built into this binary (this
	// package does not import client-go).
	Kubernetes func(Spec) (datastore.Client, error)
	// EtcdTransport is the etcd connection: long-running components use
	// etcdlib.New (etcd's client library); nil, the hand-written
	// transport is used (the CNI plugin, whose once-per-pod start must
	// not pay for grpc-go's initialisation).
	EtcdTransport etcd.NewTransportFunc
}

// EtcdConfig is the etcd client configuration the spec describes, with
// no transport chosen (Backends.New sets it).
func (s Spec) EtcdConfig() etcd.Config {
	return etcd.Config{
		Endpoints: s.Endpoints(), DiscoverySrv: s.EtcdDiscoverySrv,
		TLS: etcd.TLSFiles{
			CAFile: s.EtcdCACertFile, CertFile: s.EtcdCertFile, KeyFile: s.EtcdKeyFile,
			CA: s.EtcdCACert, Cert: s.EtcdCert, Key: s.EtcdKey,
		},
		Username: s.EtcdUsername, Password: s.EtcdPassword,
		RequestTimeout: s.RequestTimeout,
	}
}

// New builds the client the spec describes from the backends b.
func (b Backends) New(s Spec) (datastore.Client, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	switch s.DatastoreType {
	case TypeEtcdV3:
		cfg := s.EtcdConfig()
		cfg.NewTransport = b.EtcdTransport
		return etcd.New(cfg)
	case TypeKubernetes:
		if b.Kubernetes == nil {
			return nil, fmt.Errorf("the kubernetes datastore is not built into this binary")
		}
		return b.Kubernetes(s)
	}
	return nil, fmt.Errorf("datastoreType %q is not supported", s.DatastoreType)
}
