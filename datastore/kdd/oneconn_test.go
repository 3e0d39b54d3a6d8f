package kdd

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// serveCounting starts a TLS server answering "ok" that counts the
// connections it accepts; h2 says whether it offers HTTP/2.
func serveCounting(t *testing.T, h2 bool) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, r.Proto)
	}))
	s.EnableHTTP2 = h2
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the connections net/http drops
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, &conns
}

// getMany sends n requests at once through rc, as a CNI ADD starts its
// reads, and returns the protocols the server saw.
func getMany(t *testing.T, rc *rest.Config, n int) []string {
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(rc.Host + "/")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d: %s", resp.StatusCode, b)
			}
			out[i] = string(b)
		}()
	}
	wg.Wait()
	return out
}

// TestOneConnection: requests started together share one HTTP/2
// connection (one TLS handshake), with the config's credentials; a
// server without HTTP/2 is still served, over HTTP/1.
func TestOneConnection(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			s, conns := serveCounting(t, h2)
			rc, err := OneConnection(&rest.Config{Host: s.URL, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, "")
			if err != nil {
				t.Fatal(err)
			}
			if h2 {
				// Dialled ahead, before any request; the requests then
				// use that connection.
				deadline := time.Now().Add(30 * time.Second)
				for conns.Load() == 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if conns.Load() != 1 {
					t.Fatalf("%d connections before any request, want 1 (dialled ahead)", conns.Load())
				}
			}
			protos := getMany(t, rc, 8)
			want := "HTTP/2.0"
			if !h2 {
				want = "HTTP/1.1"
			}
			for _, p := range protos {
				if p != want {
					t.Fatalf("protocols %v, want all %s", protos, want)
				}
			}
			if h2 && conns.Load() != 1 {
				t.Fatalf("%d connections for 8 requests started together, want 1", conns.Load())
			}
		})
	}
	// Without it, net/http dials one connection per waiting request:
	// what the plugin paid before (the reason for OneConnection).
	s, conns := serveCounting(t, true)
	getMany(t, &rest.Config{Host: s.URL, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, 8)
	t.Logf("client-go's own transport: %d connections for 8 requests started together", conns.Load())
}

// TestOneConnectionLeavesOthers: plain HTTP, a proxy or a custom
// transport keep client-go's own transport.
func TestOneConnectionLeavesOthers(t *testing.T) {
	for name, rc := range map[string]*rest.Config{
		"http":      {Host: "http://127.0.0.1:1"},
		"proxy":     {Host: "https://127.0.0.1:1", Proxy: http.ProxyFromEnvironment},
		"transport": {Host: "https://127.0.0.1:1", Transport: http.DefaultTransport},
	} {
		got, err := OneConnection(rc, "")
		if err != nil || got != rc {
			t.Errorf("%s: changed (%v)", name, err)
		}
	}
	t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
	t.Setenv("NO_PROXY", "")
	rc := &rest.Config{Host: "https://api.example:6443"}
	if got, _ := OneConnection(rc, ""); got != rc {
		t.Error("HTTPS_PROXY naming the server: changed")
	}
}
