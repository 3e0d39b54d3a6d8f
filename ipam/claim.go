package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
)

var (
	// errBlockTaken: another node created the block first.
	errBlockTaken = errors.New("block claimed by another node")
	// errNoFreeBlock: every block of the pools exists already.
	errNoFreeBlock = errors.New("no unclaimed block left")
	// errBlockOverlaps: the claimed block turned out to overlap another
	// block (of an overlapping pool, claimed at the same time); the claim
	// was undone.
	errBlockOverlaps = errors.New("block overlaps another block")
)

func affinityKey(node string, cidr netip.Prefix) datastore.Key {
	return datastore.Key{Kind: v3.KindBlockAffinity, Name: AffinityName(node, cidr)}
}

// affineBlocks returns the node's blocks within pools, in pool order then
// newest claim first. With refresh (or nothing cached) it reads the node's
// BlockAffinities (see parseAffinities).
// consistent reads them as the store holds them now (stateWant.consistent).
func (a *Allocator) affineBlocks(ctx context.Context, node string, pools []Pool, refresh, consistent bool) (_ []netip.Prefix, listed bool, _ error) {
	a.mu.Lock()
	cached, ok := a.affine[node]
	a.mu.Unlock()
	if !ok || refresh {
		listed = true
		st, err := a.readState(ctx, node, stateWant{affinities: true, consistent: consistent})
		if err != nil {
			return nil, listed, err
		}
		cached = st.affinities
	}
	var out []netip.Prefix
	for _, p := range pools {
		var in []netip.Prefix
		for _, c := range cached {
			if p.CIDR.Contains(c.Addr()) && c.Bits() >= p.CIDR.Bits() {
				in = append(in, c)
			}
		}
		out = append(out, in...)
	}
	return out, listed, nil
}

// IndexNode makes the node's BlockAffinities that the datastore cannot
// yet find by node visible to per-node reads (datastore.NodeIndexer: on the
// Kubernetes datastore, those written by Calico before v3.31, without the
// hostname-hash label) and returns how many it changed; 0 on datastores
// that need no index. calico-node runs it at start-up, as Calico's does
// its ipam UpgradeHost.
func (a *Allocator) IndexNode(ctx context.Context, node string) (int, error) {
	return a.indexNodeFrom(ctx, node, false)
}

// indexNodeFrom is IndexNode, reading the affinities from the store's
// cache when cached (Calico before v3.31 wrote the records lacking the
// index: a cache a moment behind misses none of them).
func (a *Allocator) indexNodeFrom(ctx context.Context, node string, cached bool) (int, error) {
	ix, ok := a.c.(datastore.NodeIndexer)
	if !ok {
		return 0, nil
	}
	n, err := ix.IndexNode(ctx, v3.KindBlockAffinity, node, cached)
	if err != nil {
		return n, fmt.Errorf("indexing block affinities of node %s: %w", node, err)
	}
	return n, nil
}

// indexNode runs IndexNode before an allocation claims a new block or
// gives up: an unindexed affinity's block may have room (an allocation
// that finds room in the node's indexed blocks never pays for this). It
// says whether it found any, so the caller reads the affinities again. A
// failure is logged, not returned: claiming a new block instead is safe.
func (a *Allocator) indexNode(ctx context.Context, node string) bool {
	n, err := a.indexNodeFrom(ctx, node, a.cfg.CachedReads)
	if err != nil && ctx.Err() == nil { // cancelled: not needed after all (claimReads)
		a.log.Warn("could not label older block affinities; claiming without them", "node", node, "err", err)
	}
	if n > 0 {
		a.log.Info("labelled block affinities written without Calico's lookup labels", "node", node, "count", n)
	}
	return n > 0
}

func (a *Allocator) forgetAffinity(node string, cidr netip.Prefix) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.affine[node] = slices.DeleteFunc(slices.Clone(a.affine[node]), func(c netip.Prefix) bool { return c == cidr })
}

func (a *Allocator) rememberAffinity(node string, cidr netip.Prefix) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !slices.Contains(a.affine[node], cidr) {
		a.affine[node] = append([]netip.Prefix{cidr}, a.affine[node]...) // newest first
	}
}

// claimNewBlock claims an unclaimed block of the first pool that has one:
// one that overlaps no existing block of any pool (NextBlock).
// known, when set, is which blocks exist as read alongside the allocation's
// last look at the node's affinities (claimReads), used for the first try.
func (a *Allocator) claimNewBlock(ctx context.Context, node string, pools []Pool, known *existing) (netip.Prefix, error) {
	var taken map[netip.Prefix]bool
	var badBlocks map[string]bool
	var err error
	if known != nil {
		taken, badBlocks, err = known.taken, known.bad, known.err
	} else {
		taken, badBlocks, err = a.existingBlocks(ctx, a.cfg.CachedReads)
	}
	if err != nil {
		return netip.Prefix{}, err
	}
	undone := map[netip.Prefix]bool{} // our claims undone for overlapping: not retried
	for _, p := range pools {
		for attempt := 0; attempt < a.cfg.MaxRetries; attempt++ {
			cidr, ok := NextBlock(p.CIDR, p.BlockBits(), node, taken)
			if !ok && (len(undone) > 0 || hiddenByOtherPool(p, taken)) && attempt+1 < a.cfg.MaxRetries {
				// Our claim raced one of an overlapping pool and was
				// undone, or a block of an overlapping pool covers what
				// is left of this one: that block may be a claim about to
				// be undone (the later of two overlapping claims yields),
				// and until it is gone it hides this pool's free blocks.
				// Look again (for at most ~1 s of backoff) before calling
				// the pool full.
				if err := backoff(ctx, attempt); err != nil {
					return netip.Prefix{}, err
				}
				if taken, badBlocks, err = a.existingBlocks(ctx, false); err != nil {
					return netip.Prefix{}, err
				}
				for c := range undone {
					taken[c] = true
				}
				continue
			}
			if !ok {
				break
			}
			if badBlocks[BlockName(cidr)] {
				taken[cidr] = true
				continue
			}
			err := a.claim(ctx, node, cidr)
			switch {
			case errors.Is(err, errBlockTaken):
				taken[cidr] = true
				continue
			case errors.Is(err, errBlockOverlaps):
				// A block of an overlapping pool appeared meanwhile (its
				// claim may be undone too): look again.
				undone[cidr] = true
				if err := backoff(ctx, attempt); err != nil {
					return netip.Prefix{}, err
				}
				if taken, badBlocks, err = a.existingBlocks(ctx, false); err != nil {
					return netip.Prefix{}, err
				}
				for c := range undone {
					taken[c] = true
				}
				continue
			}
			return cidr, err
		}
	}
	return netip.Prefix{}, errNoFreeBlock
}

// hiddenByOtherPool says whether a block that is not one of p's own (of
// another size: an overlapping pool's) covers some of p's addresses.
func hiddenByOtherPool(p Pool, taken map[netip.Prefix]bool) bool {
	for c := range taken {
		if c.Bits() != p.BlockBits() && c.Overlaps(p.CIDR) {
			return true
		}
	}
	return false
}

// existingBlocks returns the CIDRs of all blocks of all pools, from their
// names alone when it can (datastore.ListNames: a claim needs only which
// blocks exist, not their allocations). A name that is not a block's CIDR
// (as Calico and Tabby name them) says nothing of what the record holds:
// then the blocks are read whole. The names of blocks stored in a form
// that cannot be decoded come apart in bad: such a block exists all the
// same and is never claimed again (its addresses may be in use).
//
// cached allows a list a little behind the store (Config.CachedReads): a
// block missed there is found taken by the claim's create. The overlap
// check after a claim, and the looks after a claim was undone, read
// consistently: there a block missed is a block overlapping ours.
func (a *Allocator) existingBlocks(ctx context.Context, cached bool) (taken map[netip.Prefix]bool, bad map[string]bool, err error) {
	names, err := datastore.ListNames(ctx, a.c, v3.KindIPAMBlock, cached)
	if err != nil {
		return nil, nil, fmt.Errorf("listing blocks: %w", err)
	}
	taken, bad = map[netip.Prefix]bool{}, map[string]bool{}
	for _, n := range names {
		c, err := ipamformat.ParseBlockName(n)
		if err != nil {
			return a.existingBlocksRead(ctx)
		}
		taken[c] = true
	}
	return taken, bad, nil
}

// existingBlocksRead is existingBlocks from the blocks' records.
func (a *Allocator) existingBlocksRead(ctx context.Context) (taken map[netip.Prefix]bool, bad map[string]bool, err error) {
	l, err := a.c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("listing blocks: %w", err)
	}
	taken, bad = map[netip.Prefix]bool{}, map[string]bool{}
	for _, r := range l.Items {
		if c, err := netip.ParsePrefix(r.(*v3.IPAMBlock).Spec.CIDR); err == nil {
			taken[c.Masked()] = true
		}
	}
	for _, b := range l.Bad {
		bad[b.Key.Name] = true
	}
	return taken, bad, nil
}

// claim makes block cidr the node's in two phases: a pending
// BlockAffinity, then the block itself created with the node's affinity
// (the create is atomic, so of several nodes racing for one block exactly
// one succeeds), then the affinity confirmed. The loser removes its pending
// affinity and gets errBlockTaken.
func (a *Allocator) claim(ctx context.Context, node string, cidr netip.Prefix) error {
	now := metav1.NewTime(a.cfg.Now())
	aff := &v3.BlockAffinity{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindBlockAffinity, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: AffinityName(node, cidr)},
		Spec: v3.BlockAffinitySpec{
			State: v3.BlockAffinityStatePending, Node: node, Type: v3.BlockAffinityTypeHost, CIDR: cidr.String(),
		},
	}
	created, err := a.c.Create(ctx, aff)
	switch {
	case errors.Is(err, datastore.ErrAlreadyExists):
		// Ours from an earlier, interrupted claim: carry on with it,
		// unless the record cannot be decoded (then it cannot be
		// confirmed either: leave the block alone).
		if _, gerr := a.c.Get(ctx, affinityKey(node, cidr)); errors.Is(gerr, datastore.ErrUndecodable) {
			a.log.Warn("not claiming a block whose affinity record cannot be decoded", "block", cidr, "node", node, "err", gerr)
			return errBlockTaken
		}
	case err != nil:
		return fmt.Errorf("claiming block %s for node %s: %w", cidr, node, err)
	}
	b := NewBlock(cidr, node, now)
	nb, err := a.c.Create(ctx, b)
	var mine *v3.IPAMBlock
	switch {
	case err == nil:
		mine = nb.(*v3.IPAMBlock)
		a.storeBlock(cidr, mine)
	case errors.Is(err, datastore.ErrAlreadyExists):
		cur, gerr := a.getBlock(ctx, cidr)
		if errors.Is(gerr, datastore.ErrNotFound) {
			// The block existed at our create and is gone now: a claim
			// being undone (overlap.go). Not ours; it may be free when
			// looked at again.
			a.dropPendingAffinity(ctx, node, cidr, created)
			return fmt.Errorf("block %s vanished while node %s claimed it: %w", cidr, node, errBlockOverlaps)
		}
		if gerr != nil {
			return fmt.Errorf("claiming block %s for node %s: %w", cidr, node, gerr)
		}
		mine = cur
		if cur.Spec.Affinity == nil || *cur.Spec.Affinity != AffinityValue(node) {
			a.dropPendingAffinity(ctx, node, cidr, created)
			return errBlockTaken
		}
	default:
		// The pending affinity stays: if the block was in fact created, the
		// next allocation confirms it; if not, it is harmless and GC
		// removes it.
		return fmt.Errorf("claiming block %s for node %s: %w", cidr, node, err)
	}
	if err := a.settleClaim(ctx, node, cidr, mine); err != nil {
		return err
	}
	if err := a.confirmAffinity(ctx, node, cidr, created); err != nil {
		return err
	}
	a.rememberAffinity(node, cidr)
	a.log.Debug("claimed block", "block", cidr, "node", node)
	return nil
}

// dropPendingAffinity removes the pending affinity this claim created (if
// it created one) after the claim was lost.
func (a *Allocator) dropPendingAffinity(ctx context.Context, node string, cidr netip.Prefix, created v3.Resource) {
	if created == nil {
		return
	}
	_, err := a.c.Delete(ctx, affinityKey(node, cidr), datastore.DeleteOptions{ResourceVersion: created.GetResourceVersion()})
	if err != nil && !errors.Is(err, datastore.ErrNotFound) {
		a.log.Warn("could not remove pending block affinity after losing a claim", "block", cidr, "node", node, "err", err)
	}
}

// confirmAffinity moves the node's affinity for cidr to confirmed. When
// the caller created the pending affinity (created, else nil), the first
// try updates that version without reading it again; a conflict (another
// process of the node confirmed it, or undid the claim) reads it.
func (a *Allocator) confirmAffinity(ctx context.Context, node string, cidr netip.Prefix, created v3.Resource) error {
	for attempt := 0; attempt < a.cfg.MaxRetries; attempt++ {
		var r v3.Resource
		var err error
		if ba, ok := created.(*v3.BlockAffinity); ok && attempt == 0 {
			r = ba.DeepCopy()
		} else {
			r, err = a.c.Get(ctx, affinityKey(node, cidr))
		}
		if errors.Is(err, datastore.ErrNotFound) {
			// Another claim of the node's undid this one (undoClaim).
			return fmt.Errorf("claim of block %s by node %s was undone concurrently: %w", cidr, node, errBlockOverlaps)
		}
		if err != nil {
			return fmt.Errorf("confirming affinity of block %s to node %s: %w", cidr, node, err)
		}
		ba := r.(*v3.BlockAffinity)
		if ba.Spec.State == v3.BlockAffinityStateConfirmed {
			return nil
		}
		ba.Spec.State = v3.BlockAffinityStateConfirmed
		_, err = a.c.Update(ctx, ba)
		if err == nil {
			return nil
		}
		if errors.Is(err, datastore.ErrNotFound) {
			return fmt.Errorf("claim of block %s by node %s was undone concurrently: %w", cidr, node, errBlockOverlaps)
		}
		if !errors.Is(err, datastore.ErrConflict) {
			return fmt.Errorf("confirming affinity of block %s to node %s: %w", cidr, node, err)
		}
		if attempt == 0 && created != nil {
			continue // our version was stale: read the current one now
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("confirming affinity of block %s to node %s: %w", cidr, node, ErrTooManyRetries)
}

// existing is which blocks exist (existingBlocks' result).
type existing struct {
	taken map[netip.Prefix]bool
	bad   map[string]bool
	err   error
}

// claimReads are the reads before a block claim, started together when
// an allocation first finds no room in the node's blocks, alongside its
// last look at the node's affinities: labelling the node's unindexed
// affinities (indexNode: whether it found any) and which blocks exist.
// On the Kubernetes datastore each is an API request of several
// milliseconds; in turn they cost three round trips before the claim's
// first write, together one. When the last look finds room they are not
// used (the claim would have needed them).
type claimReads struct {
	indexed chan bool
	names   chan existing
	cancel  context.CancelFunc
	done    chan struct{}
}

func (a *Allocator) startClaimReads(ctx context.Context, node string) *claimReads {
	ctx, cancel := context.WithCancel(ctx)
	r := &claimReads{indexed: make(chan bool, 1), names: make(chan existing, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		namesDone := make(chan struct{})
		go func() {
			defer close(namesDone)
			var e existing
			e.taken, e.bad, e.err = a.existingBlocks(ctx, a.cfg.CachedReads)
			r.names <- e
		}()
		r.indexed <- a.indexNode(ctx, node)
		<-namesDone
	}()
	return r
}

// stop ends reads the allocation did not need and waits for them.
func (r *claimReads) stop() {
	if r == nil {
		return
	}
	r.cancel()
	<-r.done
}
