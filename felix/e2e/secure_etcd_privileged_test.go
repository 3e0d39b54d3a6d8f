//go:build privileged && integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/testpki"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedDaemonWithSecuredEtcd: felix, configured through Calico's
// variables and over etcd's client library as cmd/felix runs it, programs
// policy from an etcd that requires client certificates, and from one
// with authentication on. With TLS, its certificate files are rotated
// while it runs: after the old certificate has expired and etcd has
// restarted (every connection made again), felix still follows the
// store.
func TestPrivilegedDaemonWithSecuredEtcd(t *testing.T) {

	t.Run("tls-with-rotation", func(t *testing.T) {
		e := testservers.StartEtcdTLS(t)
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "felix.pem"), filepath.Join(dir, "felix-key.pem")
		short := e.CA.Issue("felix-short", "root", testpki.Options{Client: true, ValidFor: 8 * time.Second, NotBefore: time.Now().Add(-time.Second)})
		install(t, short, certFile, keyFile)
		env := map[string]string{
			"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": e.Endpoint(),
			"ETCD_CA_CERT_FILE": e.CA.CAFile, "ETCD_CERT_FILE": certFile, "ETCD_KEY_FILE": keyFile,
		}
		admin, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()},
			TLS: etcd.TLSFiles{CAFile: e.CA.CAFile, CertFile: e.Client.CertFile, KeyFile: e.Client.KeyFile}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() })
		policyFollowed(t, admin, env, func() {
			install(t, e.CA.Issue("felix-renewed", "root", testpki.Options{Client: true}), certFile, keyFile)
			time.Sleep(time.Until(short.NotAfter) + 500*time.Millisecond)
			e.Stop()
			e.Start()
		})
	})
	t.Run("auth", func(t *testing.T) {
		e := testservers.StartEtcd(t)
		e.EnableAuth(t, "felix", "s3cret", "rootpw")
		admin, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}, Username: "root", Password: "rootpw"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { admin.Close() })
		policyFollowed(t, admin, map[string]string{
			"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": e.Endpoint(), "ETCD_USERNAME": "felix", "ETCD_PASSWORD": "s3cret",
		}, func() {})
	})
}

// policyFollowed runs felix's pipeline with a datastore client built from
// env as cmd/felix builds it, proves a deny and then an allow from the
// store with real connections, calls between in the middle, and proves a
// later deny is still followed.
func policyFollowed(t *testing.T, admin datastore.Client, env map[string]string, between func()) {
	spec, err := dsconfig.Load("/nonexistent/calicoctl.cfg", false, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c, err := dsconfig.Backends{EtcdTransport: etcdlib.New}.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	for _, r := range []v3.Resource{
		ct.NSProfile("prod", map[string]string{"team": "a"}),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("prod", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
	} {
		if _, err := admin.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	dp := runDaemon(t, c, nodeNS, nil)
	eventually(t, 10*time.Second, "programmed, client->web allowed", func() bool { return dp.InSync() && client.tcp(web, tcpPortA) })
	deny, err := admin.Create(ctx, ct.NP("prod", "default-deny", nil, "app == 'web'", ct.Ingress, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "deny from the store enforced", func() bool { return !client.tcp(web, tcpPortA) })

	between()

	if _, err := admin.Delete(ctx, datastore.KeyOf(deny), datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deny's removal followed after the interruption", func() bool { return client.tcp(web, tcpPortA) })
}

// install copies a certificate and key over the files a component reads,
// each by an atomic rename, as a certificate manager rotates them.
func install(t *testing.T, p testpki.Pair, certFile, keyFile string) {
	t.Helper()
	for dst, data := range map[string]string{certFile: p.CertPEM, keyFile: p.KeyPEM} {
		if err := os.WriteFile(dst+".tmp", []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dst+".tmp", dst); err != nil {
			t.Fatal(err)
		}
	}
}
