// Package kvpb holds the few etcdserverpb messages Tabby's etcd backend
// uses, as plain Go types with their protobuf encoding written by hand
// (wire.go) and their JSON as etcd's gateway writes it. Both transports of
// datastore/etcd speak in these types: the hand-written one (the CNI
// plugin's, no grpc-go) and the one over etcd's client library.
package kvpb

import (
	"errors"
	"strconv"
	"strings"
)

// ServerError is an error status etcd answered with (over gRPC or the
// gateway): a gRPC code and its message.
type ServerError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *ServerError) Error() string {
	return "etcdserver: " + strings.TrimPrefix(e.Message, "etcdserver: ")
}

// gRPC status codes Tabby branches on.
const (
	CodeDeadlineExceeded = 4
	CodeOutOfRange       = 11 // a compacted revision
	CodeUnavailable      = 14
)

// ErrCompacted is a watch that asked for history etcd no longer has.
var ErrCompacted = errors.New("etcd: required revision has been compacted")

// Rev is a revision: an int64 the gateway writes as a JSON string.
type Rev int64

func (r Rev) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(r), 10) + `"`), nil
}

func (r *Rev) UnmarshalJSON(b []byte) error {
	n, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*r = Rev(n)
	return err
}

// Header is a response header: the store revision it is consistent at.
type Header struct {
	Revision Rev `json:"revision"`
}

// KeyValue is one stored key, its value and revisions.
type KeyValue struct {
	Key            []byte `json:"key"`
	Value          []byte `json:"value"`
	CreateRevision Rev    `json:"create_revision"`
	ModRevision    Rev    `json:"mod_revision"`
}

// RangeRequest reads one key, or [Key, RangeEnd).
type RangeRequest struct {
	Key      []byte
	RangeEnd []byte
	KeysOnly bool
	// Limit bounds the number of keys returned (0: all); Revision reads
	// the store as of that revision (0: the current one).
	Limit    int64
	Revision Rev
}

// RangeResponse answers a RangeRequest.
type RangeResponse struct {
	Header Header
	Kvs    []KeyValue
	// More says the range holds more keys than Limit let through.
	More bool
	// Count is the number of keys in the range (all of them, whatever
	// Limit let through).
	Count int64
}

// PutRequest writes a key.
type PutRequest struct {
	Key   []byte
	Value []byte
}

// DeleteRequest removes a key.
type DeleteRequest struct {
	Key    []byte
	PrevKv bool // return the deleted key-values
}

// RequestOp is one operation of a transaction: exactly one field is set.
type RequestOp struct {
	Range  *RangeRequest
	Put    *PutRequest
	Delete *DeleteRequest
}

// compare guards a transaction on a key's create or mod revision being
// equal to a value. Exactly one of the revisions is set (a oneof).
type Compare struct {
	Key            []byte
	CreateRevision *Rev
	ModRevision    *Rev
}

// TxnRequest is a transaction: Success runs when every Compare holds,
// Failure otherwise.
type TxnRequest struct {
	Compare []Compare
	Success []RequestOp
	Failure []RequestOp
}

// TxnResponse answers a TxnRequest, one ResponseOp per operation run.
type TxnResponse struct {
	Header    Header
	Succeeded bool
	Responses []ResponseOp
}

// ResponseOp is one operation's answer: a range's key-values, or what a
// delete removed (when it asked for them).
type ResponseOp struct {
	Range  *RangeResponse
	Delete *DeleteResponse
}

// DeleteResponse holds what a delete removed, when it asked for it.
type DeleteResponse struct {
	PrevKvs []KeyValue
}

// CreateRevisionIs builds one operation or guard of a transaction.
func CreateRevisionIs(key string, r int64) Compare {
	v := Rev(r)
	return Compare{Key: []byte(key), CreateRevision: &v}
}

// ModRevisionIs builds one operation or guard of a transaction.
func ModRevisionIs(key string, r int64) Compare {
	v := Rev(r)
	return Compare{Key: []byte(key), ModRevision: &v}
}

// GetOp builds one operation or guard of a transaction.
func GetOp(key string) RequestOp { return RequestOp{Range: &RangeRequest{Key: []byte(key)}} }

// PrefixOp builds one operation or guard of a transaction.
func PrefixOp(prefix string) RequestOp {
	return RequestOp{Range: &RangeRequest{Key: []byte(prefix), RangeEnd: PrefixEnd(prefix)}}
}

// PutOp builds one operation or guard of a transaction.
func PutOp(key string, val []byte) RequestOp {
	return RequestOp{Put: &PutRequest{Key: []byte(key), Value: val}}
}

// DeleteOp builds one operation or guard of a transaction.
func DeleteOp(key string) RequestOp { return RequestOp{Delete: &DeleteRequest{Key: []byte(key)}} }

// deleteReturningOp deletes key and answers with what it held.
func DeleteReturningOp(key string) RequestOp {
	return RequestOp{Delete: &DeleteRequest{Key: []byte(key), PrevKv: true}}
}

// prefixEnd is the range end covering every key that starts with prefix:
// the prefix with its last byte below 0xff incremented.
func PrefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return []byte{0} // every key
}

// WatchEvent is one change of a watched key. Type is "" for a put.
type WatchEvent struct {
	Type   string    `json:"type"` // "" (PUT) or "DELETE"
	Kv     KeyValue  `json:"kv"`
	PrevKv *KeyValue `json:"prev_kv"`
}

// WatchResponse is one message of a watch stream.
type WatchResponse struct {
	Header          Header       `json:"header"`
	Created         bool         `json:"created"`
	Canceled        bool         `json:"canceled"`
	CompactRevision Rev          `json:"compact_revision"`
	CancelReason    string       `json:"cancel_reason"`
	Events          []WatchEvent `json:"events"`
}
