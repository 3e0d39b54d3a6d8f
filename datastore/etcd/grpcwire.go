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

	"google.golang.org/protobuf/encoding/protowire"
)

// Unary KV calls go to etcd's gRPC service directly, over HTTP/2 without
// TLS (prior knowledge, as gRPC clients do), with the few etcdserverpb
// messages encoded here field by field (protowire, no generated code and
// no registry): half the latency of the JSON gateway per request, and
// concurrent requests share one connection. Watches use the gateway
// (gateway_watch.go): a server stream is simpler there and its latency
// does not matter.

// unary calls /etcdserverpb.KV/<method> with a marshalled request and
// returns the marshalled response.
func (g *gateway) unary(ctx context.Context, method string, req []byte) ([]byte, error) {
	frame := make([]byte, 5, 5+len(req))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(req)))
	frame = append(frame, req...)
	var out []byte
	err := g.onEndpoints(ctx, func(idx int) (err error) {
		out, err = g.unaryOn(ctx, idx, method, frame)
		return err
	})
	return out, err
}

func (g *gateway) unaryOn(ctx context.Context, idx int, method string, frame []byte) ([]byte, error) {
	e := g.endpoints[idx]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.grpcBase+"/etcdserverpb.KV/"+method, bytes.NewReader(frame))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
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
		return nil, &serverError{Code: code, Message: msg}
	}
	if len(body) < 5 || body[0] != 0 || int(binary.BigEndian.Uint32(body[1:5])) != len(body)-5 {
		return nil, fmt.Errorf("etcd gRPC: malformed %s response (%d bytes)", method, len(body))
	}
	return body[5:], nil
}

// --- etcdserverpb encoding (field numbers from etcd's rpc.proto) ---

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendMessageField(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

// RangeRequest: key 1, range_end 2, keys_only 8.
func (r *rangeRequest) marshal() []byte {
	var b []byte
	b = appendBytesField(b, 1, r.Key)
	b = appendBytesField(b, 2, r.RangeEnd)
	if r.KeysOnly {
		b = appendVarintField(b, 8, 1)
	}
	return b
}

// RequestOp: request_range 1, request_put 2 (key 1, value 2),
// request_delete_range 3 (key 1, prev_kv 3).
func (op *requestOp) marshal() []byte {
	switch {
	case op.Range != nil:
		return appendMessageField(nil, 1, op.Range.marshal())
	case op.Put != nil:
		m := appendBytesField(nil, 1, op.Put.Key)
		m = appendBytesField(m, 2, op.Put.Value)
		return appendMessageField(nil, 2, m)
	default:
		m := appendBytesField(nil, 1, op.Delete.Key)
		if op.Delete.PrevKv {
			m = appendVarintField(m, 3, 1)
		}
		return appendMessageField(nil, 3, m)
	}
}

// Compare: result 1 (EQUAL 0), target 2 (CREATE 1, MOD 2), key 3,
// create_revision 5, mod_revision 6. A zero revision is still written: it
// is the oneof's value.
func (c *compare) marshal() []byte {
	var b []byte
	target, num, v := uint64(2), protowire.Number(6), int64(0)
	switch {
	case c.CreateRevision != nil:
		target, num, v = 1, 5, int64(*c.CreateRevision)
	case c.ModRevision != nil:
		v = int64(*c.ModRevision)
	}
	b = appendVarintField(b, 2, target)
	b = appendBytesField(b, 3, c.Key)
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(v))
}

// TxnRequest: compare 1, success 2, failure 3.
func (t *txnRequest) marshal() []byte {
	var b []byte
	for i := range t.Compare {
		b = appendMessageField(b, 1, t.Compare[i].marshal())
	}
	for i := range t.Success {
		b = appendMessageField(b, 2, t.Success[i].marshal())
	}
	for i := range t.Failure {
		b = appendMessageField(b, 3, t.Failure[i].marshal())
	}
	return b
}

// --- decoding ---

// eachField calls f for each field of a message, with the field's bytes
// (for length-delimited fields) or value (for varints).
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, bytes []byte, v uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var val []byte
		var v uint64
		switch typ {
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := f(num, typ, val, v); err != nil {
			return err
		}
	}
	return nil
}

// ResponseHeader: revision 3.
func (h *header) unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, _ []byte, v uint64) error {
		if num == 3 {
			h.Revision = rev(v)
		}
		return nil
	})
}

// KeyValue: key 1, create_revision 2, mod_revision 3, value 5.
func (kv *keyValue) unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, val []byte, v uint64) error {
		switch num {
		case 1:
			kv.Key = val
		case 2:
			kv.CreateRevision = rev(v)
		case 3:
			kv.ModRevision = rev(v)
		case 5:
			kv.Value = val
		}
		return nil
	})
}

// appendKeyValue decodes one KeyValue message onto kvs.
func appendKeyValue(kvs *[]keyValue, b []byte) error {
	var kv keyValue
	if err := kv.unmarshal(b); err != nil {
		return err
	}
	*kvs = append(*kvs, kv)
	return nil
}

// RangeResponse: header 1, kvs 2.
func (r *rangeResponse) unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, val []byte, _ uint64) error {
		switch num {
		case 1:
			return r.Header.unmarshal(val)
		case 2:
			return appendKeyValue(&r.Kvs, val)
		}
		return nil
	})
}

// TxnResponse: header 1, succeeded 2, responses 3 (ResponseOp:
// response_range 1, response_delete_range 3 (DeleteRangeResponse:
// prev_kvs 3); puts carry nothing we use).
func (t *txnResponse) unmarshal(b []byte) error {
	return eachField(b, func(num protowire.Number, _ protowire.Type, val []byte, v uint64) error {
		switch num {
		case 1:
			return t.Header.unmarshal(val)
		case 2:
			t.Succeeded = v != 0
		case 3:
			var op responseOp
			err := eachField(val, func(num protowire.Number, _ protowire.Type, val []byte, _ uint64) error {
				switch num {
				case 1:
					op.Range = &rangeResponse{}
					return op.Range.unmarshal(val)
				case 3:
					op.Delete = &deleteResponse{}
					return eachField(val, func(num protowire.Number, _ protowire.Type, val []byte, _ uint64) error {
						if num == 3 {
							return appendKeyValue(&op.Delete.PrevKvs, val)
						}
						return nil
					})
				}
				return nil
			})
			if err != nil {
				return err
			}
			t.Responses = append(t.Responses, op)
		}
		return nil
	})
}
