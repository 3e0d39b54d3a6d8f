package etcd

import (
	"context"
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// maxTxnOps is etcd's default --max-txn-ops: a ReadMany with more requests
// would be refused by the server.
const maxTxnOps = 128

var _ datastore.MultiReader = (*Client)(nil)

// ReadMany implements datastore.MultiReader with one read-only transaction
// holding a range per request, so every result is consistent at one
// revision and the whole costs one round trip.
func (c *Client) ReadMany(ctx context.Context, reqs []datastore.ReadRequest) ([]datastore.ReadResult, error) {
	out := make([]datastore.ReadResult, len(reqs))
	if len(reqs) > maxTxnOps {
		return nil, fmt.Errorf("reading %d objects at once: at most %d per transaction", len(reqs), maxTxnOps)
	}
	infos := make([]v3.KindInfo, len(reqs))
	var ops []kvpb.RequestOp
	opsOf := make([][2]int, len(reqs)) // [first, end) of each request's ops
	for i, r := range reqs {
		op := "get"
		if r.List {
			op = "list"
		}
		fail := func(err error) { out[i].Err = &datastore.OpError{Op: op, Key: r.Key, Err: err} }
		info, err := kindInfo(r.Key.Kind)
		if err != nil {
			fail(err)
			continue
		}
		infos[i] = info
		first := len(ops)
		switch {
		case !r.List:
			keys, err := keysFor(info, r.Key)
			if err != nil {
				fail(err)
				continue
			}
			for _, key := range keys {
				ops = append(ops, kvpb.GetOp(key))
			}
		case checkNode(info.Kind, r.Node) != nil:
			fail(checkNode(info.Kind, r.Node))
			continue
		case ipamformat.IsIPAMKind(info.Kind):
			ops = append(ops, ipamListOps(info.Kind, r.Node)...)
		default:
			ops = append(ops, kvpb.PrefixOp(listPrefix(info, r.Key.Namespace)))
		}
		opsOf[i] = [2]int{first, len(ops)}
	}
	if len(ops) > maxTxnOps {
		return nil, fmt.Errorf("reading %d keys at once: at most %d per transaction", len(ops), maxTxnOps)
	}
	if len(ops) == 0 {
		return out, nil
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	resp, err := c.gw.Txn(ctx, kvpb.TxnRequest{Success: ops})
	if err != nil {
		return nil, c.storeErr(err)
	}
	if len(resp.Responses) != len(ops) {
		return nil, fmt.Errorf("etcd: %d responses to a %d-operation transaction", len(resp.Responses), len(ops))
	}
	for i, r := range reqs {
		if out[i].Err != nil {
			continue
		}
		info := infos[i]
		var kvs []kvpb.KeyValue
		for _, tr := range resp.Responses[opsOf[i][0]:opsOf[i][1]] {
			if tr.Range != nil {
				kvs = append(kvs, tr.Range.Kvs...)
			}
		}
		if !r.List {
			_, obj, err := pickLocated(info, r.Key, kvs)
			if err != nil {
				out[i].Err = &datastore.OpError{Op: "get", Key: r.Key, Err: err}
				continue
			}
			out[i].Object = obj
			continue
		}
		l := decodeList(info, kvs, int64(resp.Header.Revision), ofNode(r.Node, func(v3.Resource) bool { return true }))
		out[i].List = l
	}
	return out, nil
}
