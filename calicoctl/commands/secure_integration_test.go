//go:build integration

package commands

import (
	"testing"

	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestCLIEtcdTLS runs the whole CLI suite, with the same golden
// transcripts, against an etcd that requires TLS client certificates,
// configured through Calico's variables and over the transport the
// calicoctl binary uses (etcd's client library).
func TestCLIEtcdTLS(t *testing.T) {
	e := testservers.StartEtcdTLS(t)
	cliSuite(t, cliBackend{name: "etcd-tls", env: map[string]string{
		"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": e.Endpoint(),
		"ETCD_CA_CERT_FILE": e.CA.CAFile, "ETCD_CERT_FILE": e.Client.CertFile, "ETCD_KEY_FILE": e.Client.KeyFile,
	}, backends: libraryTransport})
}

// TestCLIEtcdAuth: the same against an etcd with authentication on, the
// user allowed only the /calico/ prefix.
func TestCLIEtcdAuth(t *testing.T) {
	e := testservers.StartEtcd(t)
	e.EnableAuth(t, "calico", "s3cret", "rootpw")
	cliSuite(t, cliBackend{name: "etcd-auth", env: map[string]string{
		"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": e.Endpoint(), "ETCD_USERNAME": "calico", "ETCD_PASSWORD": "s3cret",
	}, backends: libraryTransport})
}

// libraryTransport is the etcd transport the calicoctl binary uses.
var libraryTransport = dsconfig.Backends{EtcdTransport: etcdlib.New}
