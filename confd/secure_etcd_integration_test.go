//go:build integration

package confd_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/internal/testservers"
)

// capture is an Applier that hands each rendered config to the test.
type capture chan string

func (c capture) Apply(_ context.Context, text string) error { c <- text; return nil }

// TestSecuredEtcdRendering: confd, configured through Calico's variables
// and over etcd's client library as cmd/confd runs it, renders BIRD's
// configuration from an etcd that requires client certificates and from
// one with authentication on, and follows a BGPPeer created later.
func TestSecuredEtcdRendering(t *testing.T) {
	yaml := "apiVersion: projectcalico.org/v3\nkind: Node\nmetadata: {name: node1}\nspec: {bgp: {ipv4Address: 10.99.0.1/24}}\n" +
		"---\napiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: pool}\nspec: {cidr: 10.244.0.0/16}\n"
	peer := "apiVersion: projectcalico.org/v3\nkind: BGPPeer\nmetadata: {name: tor}\nspec: {peerIP: 10.99.0.254, asNumber: 65010}\n"

	cases := map[string]func(t *testing.T) (admin etcd.Config, env map[string]string){
		"tls": func(t *testing.T) (etcd.Config, map[string]string) {
			e := testservers.StartEtcdTLS(t)
			files := etcd.TLSFiles{CAFile: e.CA.CAFile, CertFile: e.Client.CertFile, KeyFile: e.Client.KeyFile}
			return etcd.Config{Endpoints: []string{e.Endpoint()}, TLS: files}, map[string]string{
				"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": e.Endpoint(),
				"ETCD_CA_CERT_FILE": files.CAFile, "ETCD_CERT_FILE": files.CertFile, "ETCD_KEY_FILE": files.KeyFile,
			}
		},
		"auth": func(t *testing.T) (etcd.Config, map[string]string) {
			e := testservers.StartEtcd(t)
			e.EnableAuth(t, "confd", "s3cret", "rootpw")
			return etcd.Config{Endpoints: []string{e.Endpoint()}, Username: "root", Password: "rootpw"}, map[string]string{
				"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": e.Endpoint(), "ETCD_USERNAME": "confd", "ETCD_PASSWORD": "s3cret",
			}
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			adminCfg, env := setup(t)
			admin, err := etcd.New(adminCfg)
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			create(ctx, t, admin, yaml)
			spec, err := dsconfig.Load("/nonexistent/calicoctl.cfg", false, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			client, err := dsconfig.Backends{EtcdTransport: etcdlib.New}.New(spec)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			out := make(capture, 16)
			d := confd.NewDaemon(confd.Config{NodeName: "node1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, out)
			done := make(chan struct{})
			go func() { defer close(done); d.RunWithSyncer(ctx, client) }()
			defer func() { cancel(); <-done }()
			waitFor(t, out, "router id 10.99.0.1")
			create(ctx, t, admin, peer)
			waitFor(t, out, "10.99.0.254")
		})
	}
}

func create(ctx context.Context, t *testing.T, c datastore.Client, yaml string) {
	t.Helper()
	rs, err := v3.DecodeYAML([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatalf("creating %s: %v", r.GetName(), err)
		}
	}
}

func waitFor(t *testing.T, out capture, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case text := <-out:
			if strings.Contains(text, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no rendered config containing %q within 20s", want)
		}
	}
}
