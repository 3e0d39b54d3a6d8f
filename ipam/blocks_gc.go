package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// ReleaseEmptyBlocks gives back the node's affine blocks that have been
// empty for at least grace. A block counts as empty since the first call
// that saw it empty at the same resource version, so the caller (the node
// agent or a controller) calls this periodically; a block that was written
// in between starts over. The delete is conditional on that version, so an
// allocation racing with the release always wins. It returns the released
// blocks.
func (a *Allocator) ReleaseEmptyBlocks(ctx context.Context, node string, grace time.Duration) ([]netip.Prefix, error) {
	affs, err := a.nodeAffinities(ctx, node)
	if err != nil {
		return nil, err
	}
	now := a.cfg.Now()
	var released []netip.Prefix
	for _, ba := range affs {
		cidr, err := netip.ParsePrefix(ba.Spec.CIDR)
		if err != nil {
			continue
		}
		b, err := a.getBlock(ctx, cidr)
		if errors.Is(err, datastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return released, err
		}
		a.mu.Lock()
		seen, ok := a.empty[cidr]
		if !IsEmpty(b) || (ok && seen.rv != b.ResourceVersion) {
			delete(a.empty, cidr)
			ok = false
		}
		if IsEmpty(b) && !ok {
			a.empty[cidr] = emptySeen{rv: b.ResourceVersion, since: now}
		}
		a.mu.Unlock()
		if !ok || now.Sub(seen.since) < grace {
			continue
		}
		done, err := a.releaseAffinity(ctx, node, cidr, b, true)
		if err != nil {
			return released, err
		}
		if done {
			released = append(released, cidr)
		}
	}
	return released, nil
}

// ReleaseNodeBlocks removes every affinity of a node that no longer exists:
// empty blocks are deleted, blocks still holding addresses lose their
// affinity (their addresses stay until GC finds their owners gone). It is
// for the GC / node controller; it does not check that the node is gone.
func (a *Allocator) ReleaseNodeBlocks(ctx context.Context, node string) ([]netip.Prefix, error) {
	affs, err := a.nodeAffinities(ctx, node)
	if err != nil {
		return nil, err
	}
	var released []netip.Prefix
	for _, ba := range affs {
		cidr, err := netip.ParsePrefix(ba.Spec.CIDR)
		if err != nil {
			continue
		}
		if _, err := a.releaseAffinity(ctx, node, cidr, nil, false); err != nil {
			return released, err
		}
		released = append(released, cidr)
	}
	a.mu.Lock()
	delete(a.affine, node)
	a.mu.Unlock()
	return released, nil
}

func (a *Allocator) nodeAffinities(ctx context.Context, node string) ([]*v3.BlockAffinity, error) {
	l, err := a.c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing block affinities of node %s: %w", node, err)
	}
	var out []*v3.BlockAffinity
	for _, r := range l.Items {
		if ba := r.(*v3.BlockAffinity); ba.Spec.Node == node {
			out = append(out, ba)
		}
	}
	return out, nil
}

// releaseAffinity ends the node's affinity to a block: the affinity is
// marked pendingDeletion (allocators skip it), then the block is deleted
// if empty (conditional on the version seen: onlyIfUnchanged with seen)
// or, when it holds addresses and onlyIfUnchanged is false, un-affined,
// then the affinity is deleted. If the block changed meanwhile the
// affinity is confirmed again and false is returned.
func (a *Allocator) releaseAffinity(ctx context.Context, node string, cidr netip.Prefix, seen *v3.IPAMBlock, onlyIfUnchanged bool) (bool, error) {
	ak := affinityKey(node, cidr)
	r, err := a.c.Get(ctx, ak)
	if errors.Is(err, datastore.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ba := r.(*v3.BlockAffinity)
	ba.Spec.State = v3.BlockAffinityStatePendingDeletion
	upd, err := a.c.Update(ctx, ba)
	if err != nil {
		return false, fmt.Errorf("releasing affinity of block %s to node %s: %w", cidr, node, err)
	}
	a.forgetAffinity(node, cidr)
	restore := func() {
		ba := upd.(*v3.BlockAffinity)
		ba.Spec.State = v3.BlockAffinityStateConfirmed
		if _, err := a.c.Update(ctx, ba); err != nil {
			a.log.Warn("could not restore block affinity", "block", cidr, "node", node, "err", err)
		}
	}
	for attempt := 0; ; attempt++ {
		b := seen
		if b == nil {
			if b, err = a.getBlock(ctx, cidr); errors.Is(err, datastore.ErrNotFound) {
				break
			} else if err != nil {
				restore()
				return false, err
			}
		}
		if b.Spec.Affinity == nil || *b.Spec.Affinity != AffinityValue(node) {
			break // not ours (any more): only the affinity object is left to remove
		}
		if IsEmpty(b) {
			_, err = a.c.Delete(ctx, blockKey(cidr), datastore.DeleteOptions{ResourceVersion: b.ResourceVersion})
		} else if onlyIfUnchanged {
			restore()
			return false, nil
		} else {
			b.Spec.Affinity, b.Spec.AffinityClaimTime = nil, nil
			_, err = a.c.Update(ctx, b)
		}
		a.storeBlock(cidr, nil)
		if err == nil || errors.Is(err, datastore.ErrNotFound) {
			break
		}
		if !errors.Is(err, datastore.ErrConflict) || onlyIfUnchanged || attempt >= a.cfg.MaxRetries {
			restore()
			if errors.Is(err, datastore.ErrConflict) && onlyIfUnchanged {
				return false, nil
			}
			return false, fmt.Errorf("releasing block %s of node %s: %w", cidr, node, err)
		}
		seen = nil
		if err := backoff(ctx, attempt); err != nil {
			restore()
			return false, err
		}
	}
	if _, err := a.c.Delete(ctx, ak, datastore.DeleteOptions{ResourceVersion: upd.GetResourceVersion()}); err != nil && !errors.Is(err, datastore.ErrNotFound) {
		return false, fmt.Errorf("deleting affinity of block %s to node %s: %w", cidr, node, err)
	}
	return true, nil
}

// ReleasePoolBlocks ends every node's affinity to the blocks inside pool,
// as Calico's ReleasePoolAffinities does when an IPPool is deleted: empty
// blocks are deleted, blocks still holding addresses lose their affinity
// (so no node keeps routing them as its own) and stay, visible as blocks
// outside every pool once the pool is gone, until their addresses are
// released. Empty blocks of the pool without an affinity are deleted too
// (conditional on their version). The caller disables the pool first, so
// that no new block is claimed meanwhile; an affinity that appears while
// this runs (a claim that was under way) is released by the next pass, up
// to MaxRetries passes. It returns the blocks released or deleted.
func (a *Allocator) ReleasePoolBlocks(ctx context.Context, pool netip.Prefix) ([]netip.Prefix, error) {
	pool = pool.Masked()
	var released []netip.Prefix
	for attempt := 0; ; attempt++ {
		if attempt == a.cfg.MaxRetries {
			return released, fmt.Errorf("releasing the block affinities of pool %s: new ones keep appearing (is the pool disabled?): %w", pool, ErrTooManyRetries)
		}
		l, err := a.c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{})
		if err != nil {
			return released, fmt.Errorf("listing block affinities of pool %s: %w", pool, err)
		}
		found := 0
		for _, r := range l.Items {
			ba := r.(*v3.BlockAffinity)
			cidr, err := netip.ParsePrefix(ba.Spec.CIDR)
			if err != nil || !Inside(pool, cidr) {
				continue
			}
			found++
			if _, err := a.releaseAffinity(ctx, ba.Spec.Node, cidr, nil, false); err != nil {
				return released, err
			}
			released = append(released, cidr)
		}
		if found == 0 {
			break
		}
	}
	gone, err := a.deleteEmptyUnaffine(ctx, pool)
	return append(released, gone...), err
}

// deleteEmptyUnaffine deletes the empty blocks inside pool that no node
// holds, each conditional on the version read.
func (a *Allocator) deleteEmptyUnaffine(ctx context.Context, pool netip.Prefix) ([]netip.Prefix, error) {
	l, err := a.c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the blocks of pool %s: %w", pool, err)
	}
	var gone []netip.Prefix
	for _, r := range l.Items {
		b := r.(*v3.IPAMBlock)
		cidr, err := BlockCIDR(b)
		if err != nil || !Inside(pool, cidr) || b.Spec.Affinity != nil || !IsEmpty(b) {
			continue
		}
		_, err = a.c.Delete(ctx, blockKey(cidr), datastore.DeleteOptions{ResourceVersion: b.ResourceVersion})
		a.storeBlock(cidr, nil)
		switch {
		case err == nil:
			gone = append(gone, cidr)
		case errors.Is(err, datastore.ErrNotFound), errors.Is(err, datastore.ErrConflict):
			// Gone already, or written since: no longer ours to judge.
		default:
			return gone, fmt.Errorf("deleting empty block %s of pool %s: %w", cidr, pool, err)
		}
	}
	return gone, nil
}

// Inside reports whether block lies wholly inside pool.
func Inside(pool, block netip.Prefix) bool {
	return block.Bits() >= pool.Bits() && pool.Contains(block.Addr())
}
