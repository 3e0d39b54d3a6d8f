package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
	"golang.org/x/net/http2"
)

// gateway speaks etcd's v3 API without etcd's client library: unary KV
// calls as gRPC over HTTP/2 with hand-encoded messages (grpcwire.go), and
// watches through the JSON gateway every etcd (3.4+) serves on its client
// URLs (POST /v3/watch, protobuf-JSON: keys and values base64, int64s as
// strings). The calico CNI binary starts once per pod, and grpc-go +
// protobuf registration cost it ~4 ms of package initialisation and half
// its binary size before its first request.
type gateway struct {
	endpoints []gatewayEndpoint
	current   atomic.Int32 // index of the endpoint that answered last
	auth      *tokenAuth   // nil without a username
}

var _ Transport = (*gateway)(nil)

type gatewayEndpoint struct {
	name     string // as configured, for errors
	base     string // URL prefix of the JSON gateway
	grpcBase string // URL prefix of the gRPC service
	client   *http.Client
	h2       *http.Client
}

// endpointAddr parses an endpoint: http://host:port, https://host:port,
// host:port or unix://path (or unix:path). It returns the URL prefix of
// the API, where to connect, and whether to speak TLS.
func endpointAddr(ep string) (base, network, addr string, secure bool, err error) {
	switch {
	case strings.HasPrefix(ep, "unixs://"), strings.HasPrefix(ep, "unixs:"):
		// TLS over a unix socket; the certificate is checked against the
		// host part of the socket's name, as etcd names them
		// (localhost:2379), else "localhost".
		path := strings.TrimPrefix(strings.TrimPrefix(ep, "unixs:"), "//")
		if path == "" {
			return "", "", "", false, fmt.Errorf("etcd endpoint %q: no socket path", ep)
		}
		host := "localhost"
		if h, _, err := net.SplitHostPort(filepath.Base(path)); err == nil && h != "" {
			host = h
		}
		return "https://" + host, "unix", path, true, nil
	case strings.HasPrefix(ep, "unix://"), strings.HasPrefix(ep, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(ep, "unix:"), "//")
		if path == "" {
			return "", "", "", false, fmt.Errorf("etcd endpoint %q: no socket path", ep)
		}
		return "http://etcd", "unix", path, false, nil
	case strings.HasPrefix(ep, "https://"):
		base = strings.TrimSuffix(ep, "/")
		return base, "tcp", strings.TrimPrefix(base, "https://"), true, nil
	case strings.HasPrefix(ep, "http://"):
		base = strings.TrimSuffix(ep, "/")
	case !strings.Contains(ep, "://") && ep != "":
		base = "http://" + strings.TrimSuffix(ep, "/") // host:port, as etcdctl takes it
	default:
		return "", "", "", false, fmt.Errorf("etcd endpoint %q: want http://host:port, https://host:port, host:port, unix://path or unixs://path", ep)
	}
	return base, "tcp", strings.TrimPrefix(base, "http://"), false, nil
}

// serverName is the name an endpoint's certificate must carry: the host
// of its URL prefix (see endpointAddr).
func serverName(base string) string {
	hostport := strings.TrimPrefix(strings.TrimPrefix(base, "https://"), "http://")
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// newGateway connects lazily to the endpoints (see endpointAddr).
func newGateway(tc TransportConfig) (Transport, error) {
	g := &gateway{}
	if tc.Username != "" {
		g.auth = &tokenAuth{user: tc.Username, password: tc.Password}
	}
	for _, ep := range tc.Endpoints {
		ep = strings.TrimSpace(ep)
		base, network, addr, secure, err := endpointAddr(ep)
		if err != nil {
			return nil, err
		}
		var tlsCfg *tls.Config
		if secure {
			tlsCfg = tc.TLS.Clone()
			if tlsCfg == nil {
				tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
			}
			if tlsCfg.ServerName == "" {
				tlsCfg.ServerName = serverName(base)
			}
		}
		dialer := &net.Dialer{Timeout: tc.DialTimeout, KeepAlive: 30 * time.Second}
		dial := func(ctx context.Context) (net.Conn, error) { return dialer.DialContext(ctx, network, addr) }
		tr := &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
			TLSClientConfig:     tlsCfg,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}
		h2 := &http2.Transport{
			AllowHTTP: !secure, // h2c: gRPC without TLS
			// A connection that went silent (a partition, a dead peer)
			// is pinged and dropped, so the next request dials again
			// instead of waiting out its timeout on a dead socket.
			ReadIdleTimeout: 30 * time.Second,
			PingTimeout:     10 * time.Second,
			DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) {
				c := takePredialed(ctx, network, addr)
				if c == nil {
					var err error
					if c, err = dial(ctx); err != nil {
						return nil, err
					}
				}
				if tlsCfg == nil {
					return c, nil
				}
				cfg := tlsCfg.Clone()
				cfg.NextProtos = []string{"h2"}
				tc := tls.Client(c, cfg)
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, &tlsError{endpoint: ep, err: err}
				}
				return tc, nil
			},
		}
		g.endpoints = append(g.endpoints, gatewayEndpoint{
			name: ep, base: base, grpcBase: base,
			client: &http.Client{Transport: tr}, h2: &http.Client{Transport: h2},
		})
	}
	return g, nil
}

// Predial starts connecting to the first of endpoints in the background;
// the first gRPC request of a Client made later in this process takes the
// connection. For one-call processes (the CNI plugin) whose first request
// is on the critical path: the connection is made while the call is
// parsed. A failed or unused predial changes nothing.
func Predial(endpoints []string) {
	if len(endpoints) == 0 {
		return
	}
	_, network, addr, _, err := endpointAddr(strings.TrimSpace(endpoints[0]))
	if err != nil {
		return
	}
	ch := make(chan net.Conn, 1)
	if _, loaded := predialed.LoadOrStore(network+"|"+addr, ch); loaded {
		return
	}
	go func() {
		c, err := net.DialTimeout(network, addr, 5*time.Second)
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
}

var predialed sync.Map // network|addr -> chan net.Conn

// takePredialed returns the predialed connection to addr, waiting for a
// dial in flight, or nil.
func takePredialed(ctx context.Context, network, addr string) net.Conn {
	v, ok := predialed.LoadAndDelete(network + "|" + addr)
	if !ok {
		return nil
	}
	select {
	case c := <-v.(chan net.Conn):
		return c // nil when the dial failed
	case <-ctx.Done():
		return nil
	}
}

func (g *gateway) Close() {
	for _, e := range g.endpoints {
		e.client.CloseIdleConnections()
		e.h2.CloseIdleConnections()
	}
}

// errUnreachable marks a request that could not reach any endpoint.
var errUnreachable = errors.New("no etcd endpoint reachable")

// onEndpoints runs call on the endpoints, from the one that answered
// last, moving on only when connecting failed: a request that may have
// been applied is never sent twice.
func (g *gateway) onEndpoints(ctx context.Context, call func(idx int) error) error {
	start := int(g.current.Load())
	var errs []error
	for i := range g.endpoints {
		idx := (start + i) % len(g.endpoints)
		err := call(idx)
		if err != nil && isDialError(err) && ctx.Err() == nil {
			errs = append(errs, err)
			continue
		}
		if err == nil {
			g.current.Store(int32(idx))
		}
		return err
	}
	return fmt.Errorf("%w: %w", errUnreachable, errors.Join(errs...))
}

func (g *gateway) send(ctx context.Context, idx int, path string, body []byte, token string) (*http.Response, error) {
	e := g.endpoints[idx]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", token) // the gateway passes it on as etcd's token
	}
	return e.client.Do(req)
}

func decodeResponse(resp *http.Response, out any) error {
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		ge := &kvpb.ServerError{}
		if json.Unmarshal(data, ge) != nil || ge.Message == "" {
			return fmt.Errorf("etcd gateway: HTTP %s: %.200s", resp.Status, data)
		}
		return ge
	}
	return json.Unmarshal(data, out)
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (g *gateway) Range(ctx context.Context, req kvpb.RangeRequest) (*kvpb.RangeResponse, error) {
	b, err := g.unary(ctx, "/etcdserverpb.KV/Range", req.Marshal())
	if err != nil {
		return nil, err
	}
	out := &kvpb.RangeResponse{}
	return out, out.Unmarshal(b)
}

func (g *gateway) Txn(ctx context.Context, req kvpb.TxnRequest) (*kvpb.TxnResponse, error) {
	b, err := g.unary(ctx, "/etcdserverpb.KV/Txn", req.Marshal())
	if err != nil {
		return nil, err
	}
	out := &kvpb.TxnResponse{}
	return out, out.Unmarshal(b)
}
