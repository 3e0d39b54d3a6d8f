package kdd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/client-go/rest"
)

// OneConnection returns rc changed to send every request over a single
// HTTP/2 connection, dialled once.
//
// Why: client-go's transport is net/http's, which cannot know a server
// speaks HTTP/2 before a TLS handshake has said so; requests started
// together before the first connection is up (a CNI ADD starts 7-9 at
// once) each dial and handshake their own connection, and all but one
// are thrown away. In a process that makes one call and exits, that is
// most of its time on the API server (measured: 9 connections, ~25 ms of
// a ~40 ms ADD). x/net/http2's own connection pool shares one dial among
// the requests that wait for it.
//
// The connection is dialled at once, in the background (dialAhead): the
// caller is about to send its first requests.
//
// The HTTP/1 transport client-go would have used takes over when the
// server does not agree to HTTP/2 (ALPN), from the request that found out
// onwards. rc is returned unchanged when it is not plain TLS to the
// server: no TLS (http://), a custom transport already set, or a proxy
// configured or named by the environment for this server.
//
// With sessionPath set, the TLS session is kept in that file for the next
// process to resume (see tlssession.go for why, and when it is not used).
func OneConnection(rc *rest.Config, sessionPath string) (*rest.Config, error) {
	if rc.Transport != nil || rc.Proxy != nil {
		return rc, nil
	}
	u, err := url.Parse(rc.Host)
	if err != nil || u.Scheme != "https" {
		return rc, nil
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return rc, nil
	}
	tlsConf, err := rest.TLSConfigFor(rc)
	if err != nil || tlsConf == nil {
		return rc, err
	}
	if sessionPath != "" {
		if cache := newSessionFile(sessionPath, rc); cache != nil {
			tlsConf.ClientSessionCache = cache
		}
	}
	dial := rc.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t := &h2First{dial: dial}
	t.h2 = &http2.Transport{TLSClientConfig: tlsConf, DialTLSContext: t.dialTLS}
	t.dialAhead(u, tlsConf)
	t.h1 = &http.Transport{TLSClientConfig: tlsConf.Clone(), DialContext: dial, ForceAttemptHTTP2: true}
	out := rest.CopyConfig(rc)
	out.TLSClientConfig = rest.TLSClientConfig{}
	out.Dial = nil
	out.Transport = t
	return out, nil
}

// aheadTimeout bounds the connection dialled ahead (TCP and TLS).
const aheadTimeout = 10 * time.Second

// dialAhead starts the connection to the server now, in the background:
// a one-call process sends its first requests a few milliseconds later,
// and the TLS handshake (the server's signature, the client's chain
// check; ~3-4 ms on a busy 2-core machine) overlaps what it does until
// then. The first dial to the same address and server name takes it; if
// it failed, that dial starts over.
func (t *h2First) dialAhead(u *url.URL, tlsConf *tls.Config) {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	t.aheadAddr = net.JoinHostPort(u.Hostname(), port)
	cfg := tlsConf.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname() // as http2.Transport sets it
	}
	t.aheadName = cfg.ServerName
	t.ahead = make(chan net.Conn, 1)
	go func() {
		defer close(t.ahead)
		ctx, cancel := context.WithTimeout(context.Background(), aheadTimeout)
		defer cancel()
		if conn, err := t.handshake(ctx, "tcp", t.aheadAddr, cfg); err == nil {
			t.ahead <- conn
		}
	}()
}

// dialTLS is the HTTP/2 transport's dial: the connection dialled ahead
// when it is to the same place, else a new one.
func (t *h2First) dialTLS(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
	if addr == t.aheadAddr && cfg.ServerName == t.aheadName {
		select {
		case conn, ok := <-t.ahead:
			if ok {
				return conn, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return t.handshake(ctx, network, addr, cfg)
}

// handshake dials addr and speaks TLS, offering HTTP/2 and HTTP/1.1.
func (t *h2First) handshake(ctx context.Context, network, addr string, cfg *tls.Config) (net.Conn, error) {
	raw, err := t.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	// Offer HTTP/1.1 too: a server without HTTP/2 then says so rather
	// than refuse the handshake.
	cfg = cfg.Clone()
	cfg.NextProtos = []string{http2.NextProtoTLS, "http/1.1"}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		conn.Close()
		return nil, fmt.Errorf("%w (ALPN %q)", errNoHTTP2, p)
	}
	return conn, nil
}

// errNoHTTP2: the server did not agree to HTTP/2.
var errNoHTTP2 = errors.New("the API server does not speak HTTP/2")

// h2First sends requests over its HTTP/2 transport until a server turns
// HTTP/2 down, then over its HTTP/1 one. A request that found out is
// sent again: nothing of it went out before the handshake.
type h2First struct {
	h2   *http2.Transport
	h1   *http.Transport
	noH2 atomic.Bool
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// The connection dialled ahead (dialAhead): sent once on ahead,
	// which is then closed, when it is up; to aheadAddr, aheadName.
	ahead                chan net.Conn
	aheadAddr, aheadName string
}

func (t *h2First) RoundTrip(r *http.Request) (*http.Response, error) {
	if !t.noH2.Load() {
		resp, err := t.h2.RoundTrip(r)
		if !errors.Is(err, errNoHTTP2) {
			return resp, err
		}
		t.noH2.Store(true)
	}
	return t.h1.RoundTrip(r)
}
