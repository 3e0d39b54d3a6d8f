package etcd

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// Unary KV calls go to etcd's gRPC service directly, over HTTP/2 without
// TLS (prior knowledge, as gRPC clients do), with the few etcdserverpb
// messages encoded here field by field (protowire, no generated code and
// no registry): half the latency of the JSON gateway per request, and
// concurrent requests share one connection. Watches use the gateway
// (gateway_watch.go): a server stream is simpler there and its latency
// does not matter.

// unary calls a gRPC method (its full path, e.g. /etcdserverpb.KV/Range)
// with a marshalled request and returns the marshalled response. With a
// username it sends etcd's auth token, fetching one first, and fetches a
// new one once when etcd says the token expired.
func (g *gateway) unary(ctx context.Context, path string, req []byte) ([]byte, error) {
	frame := grpcFrame(req)
	for attempt := 0; ; attempt++ {
		token, err := g.token(ctx)
		if err != nil {
			return nil, err
		}
		var out []byte
		err = g.onEndpoints(ctx, func(idx int) (err error) {
			out, err = g.unaryOn(ctx, idx, path, frame, token)
			return err
		})
		if attempt == 0 && token != "" && isInvalidToken(err) {
			g.auth.drop(token)
			continue
		}
		return out, err
	}
}

func grpcFrame(msg []byte) []byte {
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}

func (g *gateway) unaryOn(ctx context.Context, idx int, path string, frame []byte, token string) ([]byte, error) {
	e := g.endpoints[idx]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.grpcBase+path, bytes.NewReader(frame))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	if token != "" {
		req.Header.Set("Token", token) // etcd reads the "token" metadata
	}
	resp, err := e.h2.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &url.Error{Op: "read", URL: req.URL.String(), Err: err}
	}
	status := resp.Trailer.Get("Grpc-Status")
	if status == "" { // a trailers-only response
		status = resp.Header.Get("Grpc-Status")
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd gRPC: HTTP %s", resp.Status)
	}
	if status != "0" {
		code, _ := strconv.Atoi(status)
		msg := resp.Trailer.Get("Grpc-Message")
		if msg == "" {
			msg = resp.Header.Get("Grpc-Message")
		}
		if m, err := url.PathUnescape(msg); err == nil {
			msg = m
		}
		return nil, &kvpb.ServerError{Code: code, Message: msg}
	}
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return nil, fmt.Errorf("etcd gRPC: malformed %s response (%d bytes)", path, len(body))
	}
	return body[5:], nil
}
