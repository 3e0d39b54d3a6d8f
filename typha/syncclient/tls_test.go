package syncclient_test

import (
	"context"
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/goldmane/certs"
	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncclient"
	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/syncserver"
	"github.com/tabbynet/tabby/typha/tlsconfig"
)

// TestMutualTLS: as Calico's, Typha accepts a client whose certificate
// the CA signed with the required common name, and the client accepts a
// Typha with the required common name; a wrong name on either side
// fails the connection.
func TestMutualTLS(t *testing.T) {
	p, err := certs.Write(t.TempDir(), []string{"127.0.0.1"}, "calico-node", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// The server certificate's common name is "goldmane".
	server := func(clientCN string) string {
		tc, err := tlsconfig.Server(tlsconfig.Files{CertFile: p.ServerCert, KeyFile: p.ServerKey, CAFile: p.CA, CN: clientCN})
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cache := snapcache.New("felix", time.Now, nil, nil)
		add(cache, policy("a", "1", 1))
		cache.OnStatusUpdated(datastore.StatusInSync)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = syncserver.New(map[syncproto.SyncerType]*snapcache.Cache{syncproto.SyncerTypeFelix: cache}, syncserver.Config{}).
				Serve(ctx, tls.NewListener(l, tc))
		}()
		t.Cleanup(func() { cancel(); <-done })
		return l.Addr().String()
	}
	connect := func(addr, typhaCN string) bool {
		tc, err := tlsconfig.Client(tlsconfig.Files{CertFile: p.ClientCert, KeyFile: p.ClientKey, CAFile: p.CA, CN: typhaCN})
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		cl := syncclient.New(syncclient.Config{SyncerType: syncproto.SyncerTypeFelix, TLS: tc,
			Addrs: func(context.Context) ([]string, error) { return []string{addr}, nil }}, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() { defer close(done); cl.Run(ctx) }()
		defer func() { cancel(); <-done }()
		for {
			rec.mu.Lock()
			ok := rec.inSync && len(rec.ups) == 1
			rec.mu.Unlock()
			if ok {
				return true
			}
			select {
			case <-rec.changed:
			case <-ctx.Done():
				return false
			}
		}
	}
	if !connect(server("calico-node"), "goldmane") {
		t.Error("names right on both sides: no sync")
	}
	if connect(server("someone-else"), "goldmane") {
		t.Error("Typha accepted a client whose common name it does not want")
	}
	if connect(server("calico-node"), "typha-server") {
		t.Error("the client accepted a Typha whose common name it does not want")
	}
	if _, err := tlsconfig.Client(tlsconfig.Files{CertFile: p.ClientCert, KeyFile: p.ClientKey, CAFile: p.CA}); err == nil ||
		!strings.Contains(err.Error(), "common name") {
		t.Errorf("no name to check: %v", err)
	}
}
