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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
}

type gatewayEndpoint struct {
	name     string // as configured, for errors
	base     string // URL prefix of the JSON gateway
	grpcBase string // URL prefix of the gRPC service (h2c)
	client   *http.Client
	h2       *http.Client
}

// endpointAddr parses an endpoint: http://host:port, host:port or
// unix://path (or unix:path). It returns the URL prefix of the API and
// where to connect.
func endpointAddr(ep string) (base, network, addr string, err error) {
	switch {
	case strings.HasPrefix(ep, "unix://"), strings.HasPrefix(ep, "unix:"):
		path := strings.TrimPrefix(strings.TrimPrefix(ep, "unix:"), "//")
		if path == "" {
			return "", "", "", fmt.Errorf("etcd endpoint %q: no socket path", ep)
		}
		return "http://etcd", "unix", path, nil
	case strings.HasPrefix(ep, "https://"):
		return "", "", "", fmt.Errorf("etcd endpoint %q: TLS to etcd is not supported yet", ep)
	case strings.HasPrefix(ep, "http://"):
		base = strings.TrimSuffix(ep, "/")
	case !strings.Contains(ep, "://") && ep != "":
		base = "http://" + strings.TrimSuffix(ep, "/") // host:port, as etcdctl takes it
	default:
		return "", "", "", fmt.Errorf("etcd endpoint %q: want http://host:port, host:port or unix://path", ep)
	}
	return base, "tcp", strings.TrimPrefix(base, "http://"), nil
}

// newGateway connects lazily to endpoints (see endpointAddr).
func newGateway(endpoints []string, dialTimeout time.Duration) (*gateway, error) {
	g := &gateway{}
	for _, ep := range endpoints {
		ep = strings.TrimSpace(ep)
		base, network, addr, err := endpointAddr(ep)
		if err != nil {
			return nil, err
		}
		dialer := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
		dial := func(ctx context.Context) (net.Conn, error) { return dialer.DialContext(ctx, network, addr) }
		tr := &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}
		h2 := &http2.Transport{
			AllowHTTP: true, // h2c: gRPC without TLS
			// A connection that went silent (a partition, a dead peer)
			// is pinged and dropped, so the next request dials again
			// instead of waiting out its timeout on a dead socket.
			ReadIdleTimeout: 30 * time.Second,
			PingTimeout:     10 * time.Second,
			DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) {
				if c := takePredialed(ctx, network, addr); c != nil {
					return c, nil
				}
				return dial(ctx)
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
	_, network, addr, err := endpointAddr(strings.TrimSpace(endpoints[0]))
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

func (g *gateway) close() {
	for _, e := range g.endpoints {
		e.client.CloseIdleConnections()
		e.h2.CloseIdleConnections()
	}
}

// serverError is an error status etcd answered with (over gRPC or the
// gateway): a gRPC code and its message.
type serverError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *serverError) Error() string {
	return "etcdserver: " + strings.TrimPrefix(e.Message, "etcdserver: ")
}

// gRPC status codes the gateway reports.
const (
	codeDeadlineExceeded = 4
	codeOutOfRange       = 11 // a compacted revision
	codeUnavailable      = 14
)

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

func (g *gateway) send(ctx context.Context, idx int, path string, body []byte) (*http.Response, error) {
	e := g.endpoints[idx]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return e.client.Do(req)
}

func decodeResponse(resp *http.Response, out any) error {
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		ge := &serverError{}
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

// --- etcdserverpb messages: header and keyValue are also the watch
// stream's JSON; the rest are encoded by grpcwire.go ---

// rev is an int64 the gateway writes as a JSON string.
type rev int64

func (r rev) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(r), 10) + `"`), nil
}

func (r *rev) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*r = rev(n)
	return err
}

type header struct {
	Revision rev `json:"revision"`
}

type keyValue struct {
	Key            []byte `json:"key"`
	Value          []byte `json:"value"`
	CreateRevision rev    `json:"create_revision"`
	ModRevision    rev    `json:"mod_revision"`
}

type rangeRequest struct {
	Key      []byte
	RangeEnd []byte
	KeysOnly bool
}

type rangeResponse struct {
	Header header
	Kvs    []keyValue
}

type putRequest struct {
	Key   []byte
	Value []byte
}

type deleteRequest struct {
	Key    []byte
	PrevKv bool // return the deleted key-values
}

// requestOp is one operation of a transaction: exactly one field is set.
type requestOp struct {
	Range  *rangeRequest
	Put    *putRequest
	Delete *deleteRequest
}

// compare guards a transaction on a key's create or mod revision being
// equal to a value. Exactly one of the revisions is set (a oneof).
type compare struct {
	Key            []byte
	CreateRevision *rev
	ModRevision    *rev
}

type txnRequest struct {
	Compare []compare
	Success []requestOp
	Failure []requestOp
}

type txnResponse struct {
	Header    header
	Succeeded bool
	Responses []responseOp
}

// responseOp is one operation's answer: a range's key-values, or what a
// delete removed (when it asked for them).
type responseOp struct {
	Range  *rangeResponse
	Delete *deleteResponse
}

type deleteResponse struct {
	PrevKvs []keyValue
}

func createRevisionIs(key string, r int64) compare {
	v := rev(r)
	return compare{Key: []byte(key), CreateRevision: &v}
}

func modRevisionIs(key string, r int64) compare {
	v := rev(r)
	return compare{Key: []byte(key), ModRevision: &v}
}

func getOp(key string) requestOp { return requestOp{Range: &rangeRequest{Key: []byte(key)}} }

func prefixOp(prefix string) requestOp {
	return requestOp{Range: &rangeRequest{Key: []byte(prefix), RangeEnd: prefixEnd(prefix)}}
}

func putOp(key string, val []byte) requestOp {
	return requestOp{Put: &putRequest{Key: []byte(key), Value: val}}
}

func deleteOp(key string) requestOp { return requestOp{Delete: &deleteRequest{Key: []byte(key)}} }

// deleteReturningOp deletes key and answers with what it held.
func deleteReturningOp(key string) requestOp {
	return requestOp{Delete: &deleteRequest{Key: []byte(key), PrevKv: true}}
}

// prefixEnd is the range end covering every key that starts with prefix:
// the prefix with its last byte below 0xff incremented.
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0} // every key
}

func (g *gateway) rangeKeys(ctx context.Context, req rangeRequest) (*rangeResponse, error) {
	b, err := g.unary(ctx, "Range", req.marshal())
	if err != nil {
		return nil, err
	}
	out := &rangeResponse{}
	return out, out.unmarshal(b)
}

func (g *gateway) txn(ctx context.Context, req txnRequest) (*txnResponse, error) {
	b, err := g.unary(ctx, "Txn", req.marshal())
	if err != nil {
		return nil, err
	}
	out := &txnResponse{}
	return out, out.unmarshal(b)
}
