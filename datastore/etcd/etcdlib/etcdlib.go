// Package etcdlib is datastore/etcd's Transport over etcd's own client
// library (go.etcd.io/etcd/client/v3), for long-running components
// (felix, confd, calicoctl, the node agent): TLS, authentication with
// token refresh, keepalives, health-aware balancing over the endpoints,
// one multiplexed connection for every watch, and watches that require a
// leader and ask for progress notifications, so a watch on a partitioned
// member ends instead of stalling silently.
//
// It lives in its own package so the once-per-pod CNI plugin, which uses
// the hand-written transport, does not link grpc-go.
package etcdlib

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// caCheckInterval is how often a rotated CA file is looked for.
const caCheckInterval = 10 * time.Second

// retireAfter is how long a replaced client keeps serving what was in
// flight on it when the CA rotated.
const retireAfter = 30 * time.Second

// Transport implements etcd.Transport with etcd's client library. When
// the CA file changes it builds a new client (the old one finishes what
// it was doing, then closes; its watches end and are re-established by
// their owners on the new one). Safe for concurrent use.
type Transport struct {
	cfg etcd.TransportConfig

	mu        sync.Mutex
	cli       *clientv3.Client
	caStamp   string
	checkedAt time.Time
	closed    bool
}

var _ etcd.Transport = (*Transport)(nil)

// New returns a Transport for cfg. Pass it as etcd.Config.NewTransport.
// Like the hand-written transport it connects on first use, so a store
// that is down, or refuses the credentials, shows up as that request's
// error (classified by the shared client code), not here.
func New(cfg etcd.TransportConfig) (etcd.Transport, error) {
	return &Transport{cfg: cfg, caStamp: cfg.TLSFiles.CAStamp(), checkedAt: time.Now()}, nil
}

func (t *Transport) dial(cfg etcd.TransportConfig) (*clientv3.Client, error) {
	eps := make([]string, len(cfg.Endpoints))
	for i, e := range cfg.Endpoints {
		// Tabby also takes unix:path and unixs:path; the library wants
		// the // form.
		for _, scheme := range []string{"unix:", "unixs:"} {
			if strings.HasPrefix(e, scheme) && !strings.HasPrefix(e, scheme+"//") {
				e = scheme + "//" + strings.TrimPrefix(e, scheme)
			}
		}
		eps[i] = e
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		PermitWithoutStream:  true,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	return cli, nil
}

// client returns the current client: made on first use (with a username
// that includes fetching a token, which can fail), and replaced when the
// CA file changed since it was made.
func (t *Transport) client() (*clientv3.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("etcd client closed")
	}
	if t.cli == nil {
		cli, err := t.dial(t.cfg)
		if err != nil {
			return nil, err
		}
		t.cli = cli
		return t.cli, nil
	}
	if t.cfg.TLSFiles.CAFile == "" || time.Since(t.checkedAt) < caCheckInterval {
		return t.cli, nil
	}
	t.checkedAt = time.Now()
	stamp := t.cfg.TLSFiles.CAStamp()
	if stamp == t.caStamp {
		return t.cli, nil
	}
	tlsCfg, err := etcd.NewTLSConfig(t.cfg.TLSFiles)
	if err != nil {
		return t.cli, nil // a CA file caught mid-write: keep the old one, look again later
	}
	cfg := t.cfg
	cfg.TLS = tlsCfg
	cli, err := t.dial(cfg)
	if err != nil {
		return t.cli, nil
	}
	old := t.cli
	t.cli, t.caStamp, t.cfg.TLS = cli, stamp, tlsCfg
	time.AfterFunc(retireAfter, func() { old.Close() })
	return t.cli, nil
}

// Close closes the connections.
func (t *Transport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		if t.cli != nil {
			t.cli.Close()
		}
	}
}

// Range implements etcd.Transport.
func (t *Transport) Range(ctx context.Context, req kvpb.RangeRequest) (*kvpb.RangeResponse, error) {
	cli, err := t.client()
	if err != nil {
		return nil, mapErr(err)
	}
	resp, err := cli.Get(ctx, string(req.Key), rangeOpts(req)...)
	if err != nil {
		return nil, mapErr(err)
	}
	return &kvpb.RangeResponse{Header: header(resp.Header.GetRevision()), Kvs: keyValues(resp.Kvs), More: resp.More, Count: resp.Count}, nil
}

func rangeOpts(req kvpb.RangeRequest) []clientv3.OpOption {
	var opts []clientv3.OpOption
	if len(req.RangeEnd) > 0 {
		opts = append(opts, clientv3.WithRange(string(req.RangeEnd)))
	}
	if req.KeysOnly {
		opts = append(opts, clientv3.WithKeysOnly())
	}
	if req.Limit > 0 {
		opts = append(opts, clientv3.WithLimit(req.Limit))
	}
	if req.Revision > 0 {
		opts = append(opts, clientv3.WithRev(int64(req.Revision)))
	}
	return opts
}

// Txn implements etcd.Transport.
func (t *Transport) Txn(ctx context.Context, req kvpb.TxnRequest) (*kvpb.TxnResponse, error) {
	cmps := make([]clientv3.Cmp, len(req.Compare))
	for i, c := range req.Compare {
		switch {
		case c.CreateRevision != nil:
			cmps[i] = clientv3.Compare(clientv3.CreateRevision(string(c.Key)), "=", int64(*c.CreateRevision))
		case c.ModRevision != nil:
			cmps[i] = clientv3.Compare(clientv3.ModRevision(string(c.Key)), "=", int64(*c.ModRevision))
		default:
			return nil, fmt.Errorf("etcd transaction: a compare on %q without a revision", c.Key)
		}
	}
	cli, err := t.client()
	if err != nil {
		return nil, mapErr(err)
	}
	resp, err := cli.Txn(ctx).If(cmps...).Then(ops(req.Success)...).Else(ops(req.Failure)...).Commit()
	if err != nil {
		return nil, mapErr(err)
	}
	out := &kvpb.TxnResponse{Header: header(resp.Header.GetRevision()), Succeeded: resp.Succeeded}
	for _, r := range resp.Responses {
		var op kvpb.ResponseOp
		if rr := r.GetResponseRange(); rr != nil {
			op.Range = &kvpb.RangeResponse{Header: header(rr.Header.GetRevision()), Kvs: keyValues(rr.Kvs)}
		}
		if dr := r.GetResponseDeleteRange(); dr != nil {
			op.Delete = &kvpb.DeleteResponse{PrevKvs: keyValues(dr.PrevKvs)}
		}
		out.Responses = append(out.Responses, op)
	}
	return out, nil
}

func ops(in []kvpb.RequestOp) []clientv3.Op {
	out := make([]clientv3.Op, 0, len(in))
	for _, op := range in {
		switch {
		case op.Range != nil:
			out = append(out, clientv3.OpGet(string(op.Range.Key), rangeOpts(*op.Range)...))
		case op.Put != nil:
			out = append(out, clientv3.OpPut(string(op.Put.Key), string(op.Put.Value)))
		case op.Delete != nil:
			var opts []clientv3.OpOption
			if op.Delete.PrevKv {
				opts = append(opts, clientv3.WithPrevKV())
			}
			out = append(out, clientv3.OpDelete(string(op.Delete.Key), opts...))
		}
	}
	return out
}

// Watch implements etcd.Transport. The watch requires a leader (a member
// cut off from the cluster ends it with an error) and asks for progress
// notifications; both are skipped here, not passed on.
func (t *Transport) Watch(ctx context.Context, prefix string, fromRev int64, handle func(*kvpb.WatchResponse) bool) error {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithProgressNotify()}
	if fromRev > 0 {
		opts = append(opts, clientv3.WithRev(fromRev))
	}
	cli, err := t.client()
	if err != nil {
		return mapErr(err)
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range cli.Watch(wctx, prefix, opts...) {
		if wr.CompactRevision != 0 {
			return kvpb.ErrCompacted
		}
		if err := wr.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return kvpb.ErrCompacted
			}
			if ctx.Err() != nil {
				return nil
			}
			return mapErr(err)
		}
		if wr.IsProgressNotify() || len(wr.Events) == 0 {
			continue
		}
		resp := &kvpb.WatchResponse{Header: header(wr.Header.GetRevision())}
		for _, ev := range wr.Events {
			we := kvpb.WatchEvent{Kv: keyValue(ev.Kv)}
			if ev.Type == mvccpb.DELETE {
				we.Type = "DELETE"
			}
			if ev.PrevKv != nil {
				p := keyValue(ev.PrevKv)
				we.PrevKv = &p
			}
			resp.Events = append(resp.Events, we)
		}
		if !handle(resp) {
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return &kvpb.ServerError{Code: kvpb.CodeUnavailable, Message: "etcd watch closed"}
}

func header(rev int64) kvpb.Header { return kvpb.Header{Revision: kvpb.Rev(rev)} }

func keyValue(kv *mvccpb.KeyValue) kvpb.KeyValue {
	if kv == nil {
		return kvpb.KeyValue{}
	}
	return kvpb.KeyValue{Key: kv.Key, Value: kv.Value, CreateRevision: kvpb.Rev(kv.CreateRevision), ModRevision: kvpb.Rev(kv.ModRevision)}
}

func keyValues(kvs []*mvccpb.KeyValue) []kvpb.KeyValue {
	out := make([]kvpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = keyValue(kv)
	}
	return out
}

// mapErr turns the library's errors into those the shared client code
// classifies: etcd's answers as kvpb.ServerError (gRPC code and message),
// cancellation and deadlines as the context's errors.
func mapErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return &kvpb.ServerError{Code: int(ee.Code()), Message: ee.Error()}
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Canceled:
			return fmt.Errorf("%w: %s", context.Canceled, st.Message())
		case codes.DeadlineExceeded:
			// Keep the message: a TLS or connection failure says why.
			return &kvpb.ServerError{Code: kvpb.CodeDeadlineExceeded, Message: st.Message()}
		}
		return &kvpb.ServerError{Code: int(st.Code()), Message: st.Message()}
	}
	return err
}
