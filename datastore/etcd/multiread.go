package etcd

import (
	"context"
	"fmt"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
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
	var opOf []int // request index of each op
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
		if !r.List {
			key, err := keyFor(info, r.Key)
			if err != nil {
				fail(err)
				continue
			}
			ops = append(ops, kvpb.GetOp(key))
		} else {
			if strings.Contains(r.NamePrefix, "/") {
				fail(fmt.Errorf("%w: a name prefix may not contain '/'", datastore.ErrInvalid))
				continue
			}
			prefix := listPrefix(info, r.Key.Namespace)
			if !info.Namespaced || r.Key.Namespace != "" {
				// Names are the last key segment: narrow the range.
				prefix += r.NamePrefix
			}
			ops = append(ops, kvpb.PrefixOp(prefix))
		}
		opOf = append(opOf, i)
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
	for j, tr := range resp.Responses {
		i := opOf[j]
		r, info := reqs[i], infos[i]
		rr := tr.Range
		if rr == nil {
			rr = &kvpb.RangeResponse{}
		}
		if !r.List {
			if len(rr.Kvs) == 0 {
				out[i].Err = &datastore.OpError{Op: "get", Key: r.Key, Err: datastore.ErrNotFound}
				continue
			}
			out[i].Object, err = decode(info, rr.Kvs[0])
			if err != nil {
				out[i].Err = &datastore.OpError{Op: "get", Key: r.Key, Err: err}
			}
			continue
		}
		l := decodeList(info, rr.Kvs, int64(resp.Header.Revision), func(obj v3.Resource) bool {
			return strings.HasPrefix(obj.GetName(), r.NamePrefix)
		})
		bad := l.Bad[:0]
		for _, b := range l.Bad {
			if strings.HasPrefix(b.Key.Name, r.NamePrefix) {
				bad = append(bad, b)
			}
		}
		l.Bad = bad
		out[i].List = l
	}
	return out, nil
}
