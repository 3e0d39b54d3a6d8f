package kdd

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	"github.com/tabbynet/tabby/datastore"
)

var _ datastore.NameLister = (*Client)(nil)

// ListNames implements datastore.NameLister for kinds stored only as
// custom resources, cluster-scoped: the API server is asked for the
// objects' metadata only (PartialObjectMetadataList), paged. An IPAM block
// claim needs only which blocks exist, and a block's record is large (an
// allocation array per address), so this keeps a claim's read small in a
// large cluster. Other kinds are listed whole.
func (c *Client) ListNames(ctx context.Context, kind string, cached bool) ([]string, error) {
	kb, err := c.backend(kind)
	if err != nil {
		return nil, err
	}
	if kb.info.Namespaced || len(kb.sources) != 1 || len(kb.static) != 0 || kb.sources[0].native {
		return datastore.ListNames(ctx, listOnly{c}, kind, cached)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	ri := c.meta.Resource(crdGVR(kb.info))
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, o)
	}))
	var out []string
	err = p.EachListItem(ctx, metav1.ListOptions{ResourceVersion: cachedRV(cached)}, func(o runtime.Object) error {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			return fmt.Errorf("listing %s names: unexpected object %T", kind, o)
		}
		out = append(out, m.Name)
		return nil
	})
	if err != nil {
		return nil, &datastore.OpError{Op: "list", Key: datastore.Key{Kind: kind}, Err: c.storeErr(err)}
	}
	return out, nil
}

// cachedRV is the resourceVersion of a list that may come from the API
// server's watch cache as it is ("0"), or must be consistent ("").
func cachedRV(cached bool) string {
	if cached {
		return "0"
	}
	return ""
}

// listOnly hides a Client's NameLister (for the fallback).
type listOnly struct{ datastore.Client }
