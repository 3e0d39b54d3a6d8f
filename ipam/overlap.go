package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Blocks of overlapping pools.
//
// The datastore refuses a pool overlapping another (datastore.CheckWrite),
// but pools written raw (etcdctl, kubectl on the CRD) or created at the
// same moment can still overlap, and blocks of two such pools with
// different block sizes have different keys: the atomic create of a block
// does not stop 10.50.0.0/24 and 10.50.0.0/28 both being claimed. So:
//
//   - before a claim, NextBlock skips every candidate overlapping an
//     existing block of any pool and size;
//   - after the block is created, and before its affinity is confirmed and
//     anything is allocated from it, settleClaim lists the blocks again. A
//     claim that sees another block overlapping its own undoes itself.
//
// Two claims of overlapping blocks A then B (B created after A): B's check
// runs after B's create, so it sees A (unless A is gone already) and B is
// undone. A's check may or may not see B; if it does, A is undone too
// (both retry elsewhere; safe, only a wasted claim). So two overlapping
// blocks never both pass the check. The outcome is deterministic given the
// order of the creates and checks: the later-created block always yields.
//
// Nothing allocates from a block before its claim settled: the claimer
// allocates after claim returns; a pending affinity is confirmed (and used)
// only after the check (parseAffinities); borrowing skips blocks that
// overlap another block in the same list (a borrower that saw only B
// listed after B's create, so any overlapping A came later and yields). A
// block that nonetheless holds an allocation when its claim would be undone
// is kept, logged, and reported by CheckOverlaps.

// overlapError says a claim was undone because the block overlaps others.
type overlapError struct {
	block  netip.Prefix
	node   string
	others []netip.Prefix
}

func (e *overlapError) Error() string {
	s := make([]string, len(e.others))
	for i, o := range e.others {
		s[i] = o.String()
	}
	return fmt.Sprintf("block %s for node %s overlaps block(s) %s of an overlapping IP pool: claim undone", e.block, e.node, strings.Join(s, ", "))
}

func (e *overlapError) Unwrap() error { return errBlockOverlaps }

// blocksOverlapping lists the blocks (existingBlocks) and returns those
// other than cidr that share addresses with it.
func (a *Allocator) blocksOverlapping(ctx context.Context, cidr netip.Prefix) ([]netip.Prefix, error) {
	taken, _, err := a.existingBlocks(ctx, false)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for c := range taken {
		if c != cidr && c.Overlaps(cidr) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, netip.Prefix.Compare)
	return out, nil
}

// settleClaim runs after the node's block cidr (b, as created or read)
// exists and before its affinity is confirmed: when another block overlaps
// it, the claim is undone and an *overlapError returned. When the check
// cannot run, the pending affinity stays and the next allocation on the
// node checks again (parseAffinities).
func (a *Allocator) settleClaim(ctx context.Context, node string, cidr netip.Prefix, b *v3.IPAMBlock) error {
	others, err := a.blocksOverlapping(ctx, cidr)
	if err != nil {
		return fmt.Errorf("checking block %s of node %s against overlapping blocks: %w", cidr, node, err)
	}
	if len(others) == 0 {
		return nil
	}
	kept, err := a.undoClaim(ctx, node, cidr, b)
	if err != nil {
		return err
	}
	if kept {
		a.log.Info("block overlaps a newer block, but the claim was already confirmed or the block holds addresses: kept",
			"block", cidr, "node", node, "overlaps", others)
		return nil
	}
	a.log.Info("claim undone: block overlaps a block of an overlapping IP pool", "block", cidr, "node", node, "overlaps", others)
	return &overlapError{block: cidr, node: node, others: others}
}

// undoClaim undoes the node's claim of block cidr: first its pending
// affinity, deleted only while still pending (compare-and-swap), then the
// block, deleted only while it holds no address. The affinity is where
// several claims of one block by the same node (concurrent allocations, or
// a new process finishing an interrupted claim) agree: confirming it and
// undoing it are both compare-and-swaps on it, so the claim is either
// confirmed or undone, never confirmed by one and undone under it by
// another. kept is true when the claim stands: already confirmed (another
// claim of the node checked first: the later, overlapping block yields, see
// above), or the block already holds addresses.
func (a *Allocator) undoClaim(ctx context.Context, node string, cidr netip.Prefix, b *v3.IPAMBlock) (kept bool, _ error) {
	ctx, cancel := rollbackCtx(ctx)
	defer cancel()
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("undoing claim of block %s by node %s: %w", cidr, node, err)
	}
	for attempt := 0; ; attempt++ {
		if len(Allocations(b)) > 0 {
			return true, nil
		}
		r, err := a.c.Get(ctx, affinityKey(node, cidr))
		if errors.Is(err, datastore.ErrNotFound) {
			break // undone by another claim of the node
		}
		if err != nil {
			return fail(err)
		}
		ba := r.(*v3.BlockAffinity)
		if ba.Spec.State == v3.BlockAffinityStateConfirmed {
			return true, nil
		}
		_, err = a.c.Delete(ctx, affinityKey(node, cidr), datastore.DeleteOptions{ResourceVersion: ba.ResourceVersion})
		if err == nil || errors.Is(err, datastore.ErrNotFound) {
			break
		}
		if !errors.Is(err, datastore.ErrConflict) || attempt+1 >= a.cfg.MaxRetries {
			return fail(err)
		}
	}
	a.forgetAffinity(node, cidr)
	// The affinity is gone: nothing of the node's allocates from the block
	// now. Delete it while it is still the node's and empty.
	for attempt := 0; ; attempt++ {
		if len(Allocations(b)) > 0 {
			a.log.Warn("claim undone but its block already holds addresses: block kept without affinity record", "block", cidr, "node", node)
			return false, nil
		}
		if b.Spec.Affinity == nil || *b.Spec.Affinity != AffinityValue(node) {
			break
		}
		_, err := a.c.Delete(ctx, blockKey(cidr), datastore.DeleteOptions{ResourceVersion: b.ResourceVersion})
		if err == nil || errors.Is(err, datastore.ErrNotFound) {
			break
		}
		if !errors.Is(err, datastore.ErrConflict) || attempt+1 >= a.cfg.MaxRetries {
			return fail(err)
		}
		var gerr error
		if b, gerr = a.getBlock(ctx, cidr); errors.Is(gerr, datastore.ErrNotFound) {
			break
		} else if gerr != nil {
			return fail(gerr)
		}
	}
	a.storeBlock(cidr, nil)
	return false, nil
}

// skipOverlapping drops from blocks those that overlap another of them.
func skipOverlapping(blocks []*v3.IPAMBlock) []*v3.IPAMBlock {
	cidrs := make([]netip.Prefix, 0, len(blocks))
	for _, b := range blocks {
		if c, err := BlockCIDR(b); err == nil {
			cidrs = append(cidrs, c)
		}
	}
	bad := map[netip.Prefix]bool{}
	for _, pair := range OverlappingBlocks(cidrs) {
		bad[pair[0]], bad[pair[1]] = true, true
	}
	if len(bad) == 0 {
		return blocks
	}
	out := make([]*v3.IPAMBlock, 0, len(blocks))
	for _, b := range blocks {
		if c, err := BlockCIDR(b); err == nil && !bad[c.Masked()] {
			out = append(out, b)
		}
	}
	return out
}

// CheckOverlaps describes, for a report, each pair of blocks that share
// addresses (blocks of overlapping pools with different block sizes, which
// IPAM no longer creates but older versions or raw writes did) and each
// address allocated in both blocks of a pair: handed out twice.
func CheckOverlaps(blocks []*v3.IPAMBlock) []string {
	byCIDR := map[netip.Prefix]*v3.IPAMBlock{}
	var cidrs []netip.Prefix
	for _, b := range blocks {
		c, err := BlockCIDR(b)
		if err != nil {
			continue
		}
		c = c.Masked()
		byCIDR[c] = b
		cidrs = append(cidrs, c)
	}
	var out []string
	describe := func(c netip.Prefix) string {
		b := byCIDR[c]
		owner := "no affinity"
		if b.Spec.Affinity != nil {
			owner = *b.Spec.Affinity
		}
		return fmt.Sprintf("%s (%s, %d in use)", c, owner, len(Allocations(b)))
	}
	for _, pair := range OverlappingBlocks(cidrs) {
		out = append(out, fmt.Sprintf("block %s overlaps block %s", describe(pair[0]), describe(pair[1])))
		held := map[netip.Addr]string{}
		for _, al := range Allocations(byCIDR[pair[0]]) {
			held[al.IP] = al.Handle
		}
		for _, al := range Allocations(byCIDR[pair[1]]) {
			if h, ok := held[al.IP]; ok {
				out = append(out, fmt.Sprintf("address %s is allocated twice: in block %s (handle %s) and in block %s (handle %s)", al.IP, pair[0], h, pair[1], al.Handle))
			}
		}
	}
	return out
}

// blockForAssign returns the block a specific address is assigned in: the
// existing block holding it, whatever its size (with overlapping pools it
// may be a block of the other pool, and taking the address from a second,
// overlapping block would hand it out twice), else the pool's block for
// it, to be claimed. The candidate blocks of every size are read in one
// round trip and cached for the write that follows. An address already in
// two existing blocks is refused (ErrOverlappingBlocks, or ErrInUse when
// either holds it): see calicoctl ipam check.
func (a *Allocator) blockForAssign(ctx context.Context, ip netip.Addr, pool Pool) (netip.Prefix, error) {
	lo, hi := 20, 32
	if ip.Is6() {
		lo, hi = 116, 128
	}
	var reqs []datastore.ReadRequest
	var cands []netip.Prefix
	for bits := lo; bits <= hi; bits++ {
		c := BlockFor(ip, bits)
		cands = append(cands, c)
		reqs = append(reqs, datastore.ReadRequest{Key: blockKey(c)})
	}
	res, err := datastore.ReadMany(ctx, a.c, reqs)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("reading the blocks that could hold %s: %w", ip, err)
	}
	var found []netip.Prefix
	for i, r := range res {
		switch {
		case errors.Is(r.Err, datastore.ErrNotFound):
			a.storeBlock(cands[i], nil)
		case r.Err != nil:
			return netip.Prefix{}, fmt.Errorf("reading block %s: %w", cands[i], r.Err)
		default:
			b := r.Object.(*v3.IPAMBlock)
			a.storeBlock(cands[i], b)
			for _, al := range Allocations(b) {
				if al.IP == ip {
					return netip.Prefix{}, fmt.Errorf("%s (in block %s): %w", ip, cands[i], ErrInUse)
				}
			}
			found = append(found, cands[i])
		}
	}
	switch len(found) {
	case 0:
		return BlockFor(ip, pool.BlockBits()), nil
	case 1:
		return found[0], nil
	}
	return netip.Prefix{}, fmt.Errorf("%s lies in blocks %v of overlapping pools: %w (see calicoctl ipam check)", ip, found, ErrOverlappingBlocks)
}
