package etcd

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// Transport is how a Client reaches etcd: reads, transactions and prefix
// watches in the few etcdserverpb messages of package kvpb. Everything
// above it (keys, encoding, CAS, errors, watch decoding) is shared.
//
// Two implement it: the hand-written one in this package (gRPC over
// HTTP/2 with hand-encoded messages, watches through etcd's JSON gateway),
// which keeps grpc-go out of the once-per-pod CNI plugin, and the one over
// etcd's client library (package etcdlib), for long-running components.
type Transport interface {
	Range(ctx context.Context, req kvpb.RangeRequest) (*kvpb.RangeResponse, error)
	Txn(ctx context.Context, req kvpb.TxnRequest) (*kvpb.TxnResponse, error)
	// Watch streams the changes under prefix after fromRev (0: from now)
	// to handle, until ctx ends, handle returns false or the stream
	// fails. It returns nil only when ctx ended or handle stopped it;
	// kvpb.ErrCompacted when fromRev is no longer in etcd's history.
	Watch(ctx context.Context, prefix string, fromRev int64, handle func(*kvpb.WatchResponse) bool) error
	Close()
}

// TransportConfig is what a Transport needs to connect: endpoints already
// resolved (SRV discovery done), TLS material and credentials.
type TransportConfig struct {
	Endpoints []string
	// TLS is nil for plain http:// and unix:// endpoints. Its
	// certificates are re-read from their files when those change.
	TLS *tls.Config
	// TLSFiles is where TLS came from, for a Transport that rebuilds its
	// connection when the CA file rotates.
	TLSFiles           TLSFiles
	Username, Password string
	DialTimeout        time.Duration
}

// NewTransportFunc builds a Transport.
type NewTransportFunc func(TransportConfig) (Transport, error)
