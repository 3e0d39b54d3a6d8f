package testservers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tabbynet/tabby/internal/testpki"
)

// SecureEtcd is an etcd that speaks only TLS on its client URL and
// requires a client certificate signed by CA (--client-cert-auth).
type SecureEtcd struct {
	*Etcd
	CA *testpki.CA
	// Client is a valid client certificate for the test's own use.
	Client testpki.Pair
}

// StartEtcdTLS starts a fresh etcd with TLS and client certificate
// authentication, its certificates made by a new CA, and stops it at
// cleanup. Its endpoint is https://127.0.0.1:<port>.
func StartEtcdTLS(t testing.TB) *SecureEtcd {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "etcd")
	server := ca.Issue("server", "etcd", testpki.Options{IPs: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}})
	client := ca.Issue("client", "root", testpki.Options{Client: true})
	port, peer := freePort(t), freePort(t)
	e := &Etcd{endpoint: "https://127.0.0.1:" + itoa(port)}
	// A TLS unix socket too, reachable from every network namespace.
	sock := "localhost:" + itoa(port)
	e.unix = "unixs://" + filepath.Join(dir, sock)
	e.proc = &process{t: t, name: "etcd", dir: dir, log: filepath.Join(dir, "etcd.log"), args: []string{
		binary(t, "etcd"),
		"--name", "test",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", e.endpoint + ",unixs://" + sock,
		"--advertise-client-urls", e.endpoint,
		"--cert-file", server.CertFile, "--key-file", server.KeyFile,
		"--client-cert-auth", "--trusted-ca-file", ca.CAFile,
		"--listen-peer-urls", "http://127.0.0.1:" + itoa(peer),
		"--initial-advertise-peer-urls", "http://127.0.0.1:" + itoa(peer),
		"--initial-cluster", "test=http://127.0.0.1:" + itoa(peer),
		"--unsafe-no-fsync",
		"--log-level", "warn",
	}}
	t.Cleanup(e.proc.stop)
	s := &SecureEtcd{Etcd: e, CA: ca, Client: client}
	cert, err := tls.LoadX509KeyPair(client.CertFile, client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	e.health = &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: x509Pool(t, ca.PEM()), Certificates: []tls.Certificate{cert}},
	}}
	e.Start()
	return s
}

// RawClient is etcd's own client with the test's valid client
// certificate, for setting up and inspecting the store.
func (s *SecureEtcd) RawClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(s.Client.CertFile, s.Client.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509Pool(t, s.CA.PEM())
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{s.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// EnableAuth turns on etcd's authentication on a plain etcd: a root user
// (password rootPassword) and a user with readwrite on /calico/ only
// (user/password). It returns a root client for the test's own use.
func (e *Etcd) EnableAuth(t testing.TB, user, password, rootPassword string) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	steps := []func() error{
		func() error { _, err := c.UserAdd(ctx, "root", rootPassword); return err },
		func() error { _, err := c.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := c.RoleAdd(ctx, "calico"); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, "calico", "/calico/", clientv3.GetPrefixRangeEnd("/calico/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserAdd(ctx, user, password); return err },
		func() error { _, err := c.UserGrantRole(ctx, user, "calico"); return err },
		func() error { _, err := c.AuthEnable(ctx); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("enabling etcd auth: %v", err)
		}
	}
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{e.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: "root", Password: rootPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func x509Pool(t testing.TB, pemText string) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(pemText)) {
		t.Fatal("no CA certificate in PEM")
	}
	return pool
}
