package dsconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
)

// TestBackendsNew: the client comes from the backends passed in, not
// from anything the package holds.
func TestBackendsNew(t *testing.T) {
	kube := Spec{DatastoreType: TypeKubernetes, K8sAPIEndpoint: "https://api.example:6443"}
	if _, err := (Backends{}).New(kube); err == nil || !strings.Contains(err.Error(), "not built into this binary") {
		t.Errorf("kubernetes without its backend: got %v", err)
	}
	errKube := errors.New("kube backend called")
	var got Spec
	b := Backends{Kubernetes: func(s Spec) (datastore.Client, error) { got = s; return nil, errKube }}
	if _, err := b.New(kube); !errors.Is(err, errKube) || got.K8sAPIEndpoint != kube.K8sAPIEndpoint {
		t.Errorf("kubernetes backend not used with the spec: err %v, spec %+v", err, got)
	}

	errEtcd := errors.New("etcd transport called")
	var endpoints []string
	b.EtcdTransport = func(c etcd.TransportConfig) (etcd.Transport, error) { endpoints = c.Endpoints; return nil, errEtcd }
	etcdSpec := Spec{DatastoreType: TypeEtcdV3, EtcdEndpoints: "http://127.0.0.1:2379"}
	if _, err := b.New(etcdSpec); !errors.Is(err, errEtcd) || len(endpoints) != 1 || endpoints[0] != "http://127.0.0.1:2379" {
		t.Errorf("etcd transport not used: err %v, endpoints %v", err, endpoints)
	}
	c, err := (Backends{}).New(etcdSpec) // the hand-written transport, connecting lazily
	if err != nil {
		t.Fatalf("etcd with the default transport: %v", err)
	}
	c.Close()
}
