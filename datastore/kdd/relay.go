package kdd

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// RelayMissStatus is calico-node's relay's answer to a request it does
// not hold (node/kuberelay): the client then asks the API server.
const RelayMissStatus = http.StatusMisdirectedRequest

// relayDialTimeout bounds a connection to the relay.
const relayDialTimeout = 100 * time.Millisecond

// relayListening reports whether socket is a unix socket (calico-node's
// relay made it; a stale one left by a killed calico-node refuses the
// first read, and the client then stops asking it).
func relayListening(socket string) bool {
	st, err := os.Stat(socket)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

// ViaRelay returns rc changed so that its reads that may be a little
// behind (GETs at resourceVersion 0, which the API server answers from
// its watch cache) are first asked of calico-node's relay at socket,
// which answers them from its own watches when it holds exactly what is
// asked. Every other request, every read the relay does not hold, and
// every read after the relay failed once go to the API server as before,
// with the client's own credentials; the relay is sent none.
func ViaRelay(rc *rest.Config, socket string) *rest.Config {
	out := rest.CopyConfig(rc)
	wrap := rc.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		dialer := &net.Dialer{Timeout: relayDialTimeout}
		return &relayFirst{next: rt, relay: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, "unix", socket)
			},
			MaxIdleConnsPerHost: 16, DisableCompression: true,
		}}
	}
	return out
}

// relayFirst asks the relay before next, for the reads it may hold.
type relayFirst struct {
	next  http.RoundTripper
	relay http.RoundTripper
	down  atomic.Bool // the relay failed once: not asked again
}

func (r *relayFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.down.Load() || !cachedRead(req) {
		return r.next.RoundTrip(req)
	}
	rr := req.Clone(req.Context())
	rr.Header.Del("Authorization")
	rr.URL.Scheme, rr.URL.Host, rr.Host = "http", "kube-relay", "kube-relay"
	resp, err := r.relay.RoundTrip(rr)
	switch {
	case err != nil:
		r.down.Store(true)
	case resp.StatusCode == RelayMissStatus:
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	default:
		return resp, nil
	}
	return r.next.RoundTrip(req)
}

// cachedRead: a GET at resourceVersion 0 that is not a watch.
func cachedRead(req *http.Request) bool {
	if req.Method != http.MethodGet || req.Body != nil && req.Body != http.NoBody {
		return false
	}
	q := req.URL.Query()
	return q.Get("resourceVersion") == "0" && q.Get("watch") == ""
}
