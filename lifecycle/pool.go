package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// DeletePool deletes an IPPool as Calico's ipPools.Delete does: the pool
// is disabled first (so nothing more is allocated from it; opts'
// ResourceVersion, when given, is the precondition of that update), then,
// after a short pause for allocations under way, every block affinity
// inside it is released (empty blocks deleted, blocks still holding
// addresses un-affined: no node routes or blackholes them as its own any
// more) and its empty blocks are deleted; then the pool itself. Blocks that
// still hold addresses stay, outside every pool, until their addresses are
// released (calicoctl ipam show and ipam check show them).
func (d Deleter) DeletePool(ctx context.Context, name string, opts datastore.DeleteOptions) (v3.Resource, error) {
	key := datastore.Key{Kind: v3.KindIPPool, Name: name}
	r, err := d.Client.Get(ctx, key)
	if errors.Is(err, datastore.ErrUndecodable) {
		// A damaged record must still be deletable; its CIDR is unknown,
		// so its blocks stay (ipam check reports them outside every pool).
		d.log().Warn("deleting an IP pool whose record cannot be decoded: its blocks are not released", "pool", name, "err", err)
		return d.Client.Delete(ctx, key, opts)
	}
	if err != nil {
		return nil, err
	}
	p := r.(*v3.IPPool)
	if !p.Spec.Disabled {
		p.Spec.Disabled = true
		if opts.ResourceVersion != "" {
			p.ResourceVersion = opts.ResourceVersion
		}
		if _, err := d.Client.Update(ctx, p); err != nil {
			return nil, fmt.Errorf("disabling IPPool %s before deleting it: %w", name, err)
		}
		// The version has moved on with the update.
		opts.ResourceVersion = ""
	}
	if cidr, err := netip.ParsePrefix(p.Spec.CIDR); err == nil {
		settle := d.Settle
		if settle == 0 {
			settle = 500 * time.Millisecond
		}
		if settle > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(settle):
			}
		}
		al := ipam.New(d.Client, ipam.Config{Logger: d.log()})
		released, err := al.ReleasePoolBlocks(ctx, cidr)
		if err != nil {
			return nil, fmt.Errorf("releasing the blocks of IPPool %s: %w", name, err)
		}
		if len(released) > 0 {
			d.log().Info("released the blocks of a deleted IP pool", "pool", name, "blocks", len(released))
		}
	}
	return d.Client.Delete(ctx, key, opts)
}
