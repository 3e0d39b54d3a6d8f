//go:build integration

package etcd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dstest"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/internal/testpki"
	"github.com/tabbynet/tabby/internal/testservers"
)

// transports are the two ways a Client reaches etcd: the hand-written one
// (the CNI plugin's) and etcd's client library (everything long-running).
var transports = []struct {
	name string
	new  etcd.NewTransportFunc
}{
	{"wire", nil},
	{"library", etcdlib.New},
}

// suite runs the shared datastore suite with cfg (endpoints and
// credentials set), raw being a client allowed to empty and compact the
// store.
func suite(t *testing.T, raw *clientv3.Client, server *testservers.Etcd, cfg etcd.Config) {
	dstest.Run(t, dstest.Harness{
		New: func(t *testing.T) datastore.Client {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := raw.Delete(ctx, "/calico/", clientv3.WithPrefix()); err != nil {
				t.Fatalf("emptying etcd: %v", err)
			}
			c, err := etcd.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		},
		ForceRevisionGone: func(t *testing.T, _ datastore.Client, _ string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := raw.Get(ctx, "/calico/compact-marker")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
				t.Fatalf("compacting: %v", err)
			}
		},
		StopServer:  func(*testing.T) { server.Stop() },
		StartServer: func(*testing.T) { server.Start() },
		PutUndecodable: func(t *testing.T, k datastore.Key) {
			key, err := etcd.KeyOf(k)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := raw.Put(ctx, key, `{"kind":"`+k.Kind+`","spec":{"ci`); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestSuiteOverTLSWithClientCertificates: etcd with --client-cert-auth;
// the whole suite over both transports, certificates from files and
// inline.
func TestSuiteOverTLSWithClientCertificates(t *testing.T) {
	server := testservers.StartEtcdTLS(t)
	raw := server.RawClient(t)
	for _, tr := range transports {
		t.Run(tr.name+"/files", func(t *testing.T) {
			suite(t, raw, server.Etcd, etcd.Config{
				Endpoints:    []string{server.Endpoint()},
				TLS:          etcd.TLSFiles{CAFile: server.CA.CAFile, CertFile: server.Client.CertFile, KeyFile: server.Client.KeyFile},
				NewTransport: tr.new, RequestTimeout: 5 * time.Second,
			})
		})
	}
	t.Run("library/inline", func(t *testing.T) {
		c, err := etcd.New(etcd.Config{
			Endpoints:    []string{server.Endpoint()},
			TLS:          etcd.TLSFiles{CA: server.CA.PEM(), Cert: server.Client.CertPEM, Key: server.Client.KeyPEM},
			NewTransport: etcdlib.New,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		roundTrip(t, c)
	})
}

// TestSuiteWithAuthentication: etcd with authentication on, Tabby's user
// limited to the /calico/ prefix.
func TestSuiteWithAuthentication(t *testing.T) {
	server := testservers.StartEtcd(t)
	root := server.EnableAuth(t, "calico", "s3cret", "rootpw")
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			suite(t, root, server, etcd.Config{
				Endpoints: []string{server.Endpoint()}, Username: "calico", Password: "s3cret",
				NewTransport: tr.new, RequestTimeout: 5 * time.Second,
			})
		})
	}
}

// roundTrip creates, reads and deletes one pool.
func roundTrip(t *testing.T, c datastore.Client) {
	t.Helper()
	ctx := context.Background()
	name := "rt-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.IPPoolSpec{CIDR: "10.77.0.0/16"}}
	if _, err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: name}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: name}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// wantAccessDenied checks a Get fails with ErrAccessDenied whose message
// says want, and is not taken for the store being down.
func wantAccessDenied(t *testing.T, cfg etcd.Config, want string) {
	t.Helper()
	cfg.DialTimeout, cfg.RequestTimeout = 2*time.Second, 4*time.Second
	c, err := etcd.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	_, err = c.Get(context.Background(), datastore.Key{Kind: v3.KindIPPool, Name: "x"})
	if !errors.Is(err, datastore.ErrAccessDenied) || errors.Is(err, datastore.ErrUnavailable) {
		t.Fatalf("got %v, want ErrAccessDenied (and not ErrUnavailable)", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

// TestBadCredentials: each way a secured etcd and a client can disagree
// fails with an error naming the cause, over both transports.
func TestBadCredentials(t *testing.T) {
	tlsServer := testservers.StartEtcdTLS(t)
	other := testpki.NewCA(t, t.TempDir(), "other")
	otherClient := other.Issue("stranger", "root", testpki.Options{Client: true})
	expired := tlsServer.CA.Issue("expired", "root", testpki.Options{Client: true, ValidFor: -1})
	good := etcd.TLSFiles{CAFile: tlsServer.CA.CAFile, CertFile: tlsServer.Client.CertFile, KeyFile: tlsServer.Client.KeyFile}

	authServer := testservers.StartEtcd(t)
	root := authServer.EnableAuth(t, "calico", "s3cret", "rootpw")
	ctx := context.Background()
	if _, err := root.UserAdd(ctx, "outsider", "pw"); err != nil {
		t.Fatal(err)
	}

	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			tlsCfg := func(f etcd.TLSFiles) etcd.Config {
				return etcd.Config{Endpoints: []string{tlsServer.Endpoint()}, TLS: f, NewTransport: tr.new}
			}
			t.Run("WrongCA", func(t *testing.T) {
				f := good
				f.CAFile = other.CAFile
				wantAccessDenied(t, tlsCfg(f), "not signed by a CA this client trusts")
			})
			t.Run("NoClientCertificate", func(t *testing.T) {
				wantAccessDenied(t, tlsCfg(etcd.TLSFiles{CAFile: tlsServer.CA.CAFile}), "client certificate")
			})
			t.Run("UntrustedClientCertificate", func(t *testing.T) {
				f := good
				f.CertFile, f.KeyFile = otherClient.CertFile, otherClient.KeyFile
				wantAccessDenied(t, tlsCfg(f), "refused the client certificate")
			})
			t.Run("ExpiredClientCertificate", func(t *testing.T) {
				f := good
				f.CertFile, f.KeyFile = expired.CertFile, expired.KeyFile
				wantAccessDenied(t, tlsCfg(f), "refused the client certificate")
			})
			authCfg := func(user, pw string) etcd.Config {
				return etcd.Config{Endpoints: []string{authServer.Endpoint()}, Username: user, Password: pw, NewTransport: tr.new}
			}
			t.Run("WrongPassword", func(t *testing.T) {
				wantAccessDenied(t, authCfg("calico", "wrong"), "refused the username or password")
			})
			t.Run("NoPermissionOnCalicoKeys", func(t *testing.T) {
				wantAccessDenied(t, authCfg("outsider", "pw"), "no permission on Calico's keys")
			})
			t.Run("NoCredentials", func(t *testing.T) {
				wantAccessDenied(t, authCfg("", ""), "authentication enabled")
			})
		})
	}
}

// TestConfigurationErrors: settings that cannot work fail at New, naming
// Calico's setting.
func TestConfigurationErrors(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, dir, "c")
	pair := ca.Issue("p", "x", testpki.Options{Client: true})
	empty := dir + "/empty.pem"
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		cfg  etcd.Config
		want string
	}{
		"both endpoints and SRV": {etcd.Config{Endpoints: []string{"https://a:2379"}, DiscoverySrv: "example.com"}, "etcdEndpoints and etcdDiscoverySrv"},
		"neither":                {etcd.Config{}, "no endpoints configured"},
		"cert without key":       {etcd.Config{Endpoints: []string{"https://a:2379"}, TLS: etcd.TLSFiles{CertFile: pair.CertFile}}, "needs its key"},
		"inline key only":        {etcd.Config{Endpoints: []string{"https://a:2379"}, TLS: etcd.TLSFiles{Key: pair.KeyPEM}}, "needs its key"},
		"empty CA file":          {etcd.Config{Endpoints: []string{"https://a:2379"}, TLS: etcd.TLSFiles{CAFile: empty}}, "no PEM certificate"},
		"missing cert file":      {etcd.Config{Endpoints: []string{"https://a:2379"}, TLS: etcd.TLSFiles{CertFile: dir + "/nope", KeyFile: pair.KeyFile}}, "etcdCertFile"},
		"file and inline CA":     {etcd.Config{Endpoints: []string{"https://a:2379"}, TLS: etcd.TLSFiles{CAFile: ca.CAFile, CA: ca.PEM()}}, "use one"},
		"password without user":  {etcd.Config{Endpoints: []string{"http://a:2379"}, Password: "x"}, "etcdUsername"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := etcd.New(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// TestDiscoverySrv: endpoints come from the domain's SRV records, https
// for _etcd-client-ssl, and the store is reached through them.
func TestDiscoverySrv(t *testing.T) {
	server := testservers.StartEtcdTLS(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(server.Endpoint(), "https://"))
	lookup := func(service, proto, name string) (string, []*net.SRV, error) {
		if service == "etcd-client-ssl" && proto == "tcp" && name == "example.test" {
			var p uint16
			for _, ch := range port {
				p = p*10 + uint16(ch-'0')
			}
			return "", []*net.SRV{{Target: "localhost.", Port: p}}, nil
		}
		return "", nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c, err := etcd.New(etcd.Config{
				DiscoverySrv: "example.test", LookupSRV: lookup, NewTransport: tr.new,
				TLS: etcd.TLSFiles{CAFile: server.CA.CAFile, CertFile: server.Client.CertFile, KeyFile: server.Client.KeyFile},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			roundTrip(t, c)
		})
	}
	_, err := etcd.New(etcd.Config{DiscoverySrv: "nothing.test", LookupSRV: lookup})
	if err == nil || !strings.Contains(err.Error(), "nothing.test") {
		t.Fatalf("got %v, want an error naming the domain", err)
	}
}

// TestClientCertificateRotation: a running client whose certificate
// files are replaced presents the new certificate on its next
// connection: after the old one has expired and etcd restarted, it works
// on without a restart of its own.
func TestClientCertificateRotation(t *testing.T) {
	server := testservers.StartEtcdTLS(t)
	dir := t.TempDir()
	certFile, keyFile := dir+"/client.pem", dir+"/client-key.pem"
	install := func(p testpki.Pair) {
		for src, dst := range map[string]string{p.CertFile: certFile, p.KeyFile: keyFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			short := server.CA.Issue("short-"+tr.name, "root", testpki.Options{Client: true, ValidFor: 5 * time.Second, NotBefore: time.Now().Add(-time.Second)})
			install(short)
			c, err := etcd.New(etcd.Config{
				Endpoints: []string{server.Endpoint()}, NewTransport: tr.new, RequestTimeout: 3 * time.Second,
				TLS: etcd.TLSFiles{CAFile: server.CA.CAFile, CertFile: certFile, KeyFile: keyFile},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			roundTrip(t, c)
			renewed := server.CA.Issue("renewed-"+tr.name, "root", testpki.Options{Client: true})
			install(renewed)
			// The short certificate expires; the connection made with it
			// ends with etcd's restart.
			time.Sleep(time.Until(short.NotAfter))
			server.Stop()
			server.Start()
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, err := c.Get(context.Background(), datastore.Key{Kind: v3.KindIPPool, Name: "none"})
				if errors.Is(err, datastore.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after rotation and restart: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// TestSuiteOverLibrary: the shared suite over etcd's client library on a
// plain etcd, its first endpoint dead and the second the unix socket
// (the hand-written transport runs the same in etcd_integration_test).
func TestSuiteOverLibrary(t *testing.T) {
	server := testservers.StartEtcd(t)
	raw, err := clientv3.New(clientv3.Config{Endpoints: []string{server.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	suite(t, raw, server, etcd.Config{
		Endpoints:    []string{"http://127.0.0.1:1", server.UnixEndpoint()},
		NewTransport: etcdlib.New, RequestTimeout: 5 * time.Second,
	})
}
