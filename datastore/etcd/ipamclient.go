package etcd

import (
	"context"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// decodeIPAMKV decodes an IPAM record in Calico's model format; a key
// outside Calico's layout or a value that does not decode is a BadRecord.
func decodeIPAMKV(info v3.KindInfo, kv kvpb.KeyValue) (v3.Resource, error) {
	pk, _, err := ipamformat.ParseKey(info.Kind, string(kv.Key))
	if err == nil && pk.Name == "" {
		err = fmt.Errorf("%q is not a key of %s in Calico's layout", kv.Key, info.Kind)
	}
	if err != nil {
		return nil, badRecord(info, kv, err)
	}
	obj, err := ipamformat.Decode(info, pk, kv.Value)
	if err != nil {
		return nil, badRecord(info, kv, fmt.Errorf("decoding stored %s (Calico's model format): %w", info.Kind, err))
	}
	obj.SetUID(derivedUID(string(kv.Key), int64(kv.CreateRevision)))
	obj.SetCreationTimestamp(metav1.Now()) // age unknown: young, never old
	obj.SetResourceVersion(strconv.FormatInt(int64(kv.ModRevision), 10))
	return obj, nil
}

// ipamListOps are the range reads listing kind (one node's BlockAffinities
// when node is set).
func ipamListOps(kind, node string) []kvpb.RequestOp {
	var ops []kvpb.RequestOp
	for _, r := range ipamListRanges(kind, node) {
		rr := &kvpb.RangeRequest{Key: []byte(r[0])}
		if r[1] != "" {
			rr.RangeEnd = []byte(r[1])
		}
		ops = append(ops, kvpb.RequestOp{Range: rr})
	}
	return ops
}

// readRanges runs the range reads ops at one revision (one Range, or a
// read-only transaction when there are several) and returns the
// key-values of all.
func (c *Client) readRanges(ctx context.Context, ops []kvpb.RequestOp) ([]kvpb.KeyValue, int64, error) {
	if len(ops) == 1 {
		resp, err := c.gw.Range(ctx, *ops[0].Range)
		if err != nil {
			return nil, 0, c.storeErr(err)
		}
		return resp.Kvs, int64(resp.Header.Revision), nil
	}
	resp, err := c.gw.Txn(ctx, kvpb.TxnRequest{Success: ops})
	if err != nil {
		return nil, 0, c.storeErr(err)
	}
	var kvs []kvpb.KeyValue
	for _, r := range resp.Responses {
		if r.Range != nil {
			kvs = append(kvs, r.Range.Kvs...)
		}
	}
	return kvs, int64(resp.Header.Revision), nil
}

// locate reads the keys a name may stand for (keysFor) in one
// transaction and returns the one that exists with its object; none is
// ErrNotFound, several an error naming them.
func (c *Client) locate(ctx context.Context, info v3.KindInfo, k datastore.Key, keys []string) (string, v3.Resource, error) {
	ops := make([]kvpb.RequestOp, len(keys))
	for i, key := range keys {
		ops[i] = kvpb.GetOp(key)
	}
	kvs, _, err := c.readRanges(ctx, ops)
	if err != nil {
		return "", nil, err
	}
	return pickLocated(info, k, kvs)
}

// pickLocated chooses the one record among kvs read for a name.
func pickLocated(info v3.KindInfo, k datastore.Key, kvs []kvpb.KeyValue) (string, v3.Resource, error) {
	switch len(kvs) {
	case 0:
		return "", nil, datastore.ErrNotFound
	case 1:
		obj, err := decode(info, kvs[0])
		return string(kvs[0].Key), obj, err
	}
	var found []string
	for _, kv := range kvs {
		found = append(found, string(kv.Key))
	}
	return "", nil, fmt.Errorf("%s %q is ambiguous: it names each of %q", info.Kind, k.Name, found)
}
