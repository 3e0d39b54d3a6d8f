package ipam

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// What an allocation reads before its first write: the cluster settings
// (pools, IPAMConfiguration, reservations), the node's labels and the
// node's block affinities. These are independent reads, so readState asks
// for all the missing ones at once with datastore.ReadMany: one read-only
// transaction on etcd (one round trip, one consistent revision), parallel
// requests on other backends.

// stateWant says which parts of the state to read.
type stateWant struct {
	env, labels, affinities bool
	// consistent asks for the lists as the store holds them now; without
	// it, and with Config.CachedReads, they may come from a cache a little
	// behind (datastore.ListOptions.Cached: on the Kubernetes datastore a
	// consistent list waits ~90 ms after any write in the cluster). Stale is safe for these reads: a
	// pool or reservation changed a moment ago is a race the allocation
	// could lose anyway, and an affinity missed only leads to a claim whose
	// create finds the block taken (or to a block given up by the node, which
	// the block's own compare-and-swap refuses). The same holds for the
	// IPAM settings and the node's labels, read with them, and for the
	// blocks (datastore.CachedGetter): each block write is a
	// compare-and-swap on the version read, so a block read behind the
	// store costs a retry, never an address given twice. Consistent after waiting
	// for another process's claim (Config.ClaimLock): its new affinity must
	// be seen, or this process claims a second block.
	consistent bool
	// blocks are read too and cached if the affinities read with them
	// show them affine to the node (needs affinities).
	blocks []netip.Prefix
}

// state is what readState read; fields not asked for are zero.
type state struct {
	env        *env
	labels     map[string]string
	affinities []netip.Prefix // confirmed, newest claim first
}

// readState reads the parts of the state want names for node, stores them
// in the caches and returns them.
func (a *Allocator) readState(ctx context.Context, node string, want stateWant) (state, error) {
	var reqs []datastore.ReadRequest
	add := func(r datastore.ReadRequest) int { reqs = append(reqs, r); return len(reqs) - 1 }
	cached := a.cfg.CachedReads && !want.consistent
	iPools, iRes, iCfg, iNode, iAff := -1, -1, -1, -1, -1
	if want.env {
		iPools = add(datastore.ReadRequest{Key: datastore.Key{Kind: v3.KindIPPool}, List: true, Cached: cached})
		iRes = add(datastore.ReadRequest{Key: datastore.Key{Kind: v3.KindIPReservation}, List: true, Cached: cached})
		iCfg = add(datastore.ReadRequest{Key: datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"}, Cached: cached})
	}
	if want.labels {
		iNode = add(datastore.ReadRequest{Key: datastore.Key{Kind: v3.KindNode, Name: node}, Cached: cached})
	}
	if want.affinities {
		// Only this node's: the read costs O(node), not O(cluster).
		iAff = add(datastore.ReadRequest{Key: datastore.Key{Kind: v3.KindBlockAffinity}, List: true, Node: node, Cached: cached})
	}
	iBlocks := len(reqs)
	if want.affinities {
		for _, c := range want.blocks {
			add(datastore.ReadRequest{Key: blockKey(c), Cached: cached})
		}
	}
	var st state
	if len(reqs) == 0 {
		return st, nil
	}
	now := a.cfg.Now()
	res, err := datastore.ReadMany(ctx, a.c, reqs)
	if err != nil {
		return st, fmt.Errorf("reading IPAM settings for node %s: %w", node, err)
	}
	if want.env {
		if st.env, err = parseEnv(res[iPools], res[iRes], res[iCfg]); err != nil {
			return st, err
		}
		st.env.at = now
	}
	if want.labels {
		switch r := res[iNode]; {
		case r.Err == nil:
			st.labels = r.Object.GetLabels()
		case !errors.Is(r.Err, datastore.ErrNotFound):
			return st, fmt.Errorf("reading node %s: %w", node, r.Err)
		}
	}
	if want.affinities {
		if r := res[iAff]; r.Err != nil {
			return st, fmt.Errorf("listing block affinities of node %s: %w", node, r.Err)
		}
		for _, b := range res[iAff].List.Bad {
			// Its block is not used by this node (nor claimed again, see
			// claim) until the record is fixed or deleted.
			a.log.Warn("skipping a block affinity that cannot be decoded", "node", node, "storageKey", b.StorageKey, "err", b.Err)
		}
		if st.affinities, err = a.parseAffinities(ctx, node, res[iAff].List.Items); err != nil {
			return st, err
		}
		for i, c := range want.blocks {
			if r := res[iBlocks+i]; r.Err == nil && slices.Contains(st.affinities, c) {
				a.storeBlock(c, r.Object.(*v3.IPAMBlock))
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if want.env {
		a.env = st.env
	}
	if want.labels {
		a.labels[node] = cachedLabels{labels: st.labels, at: now}
	}
	if want.affinities {
		a.affine[node] = st.affinities
	}
	return st, nil
}

// parseEnv builds the settings from the pools, reservations and
// IPAMConfiguration reads.
func parseEnv(pl, rl, cfg datastore.ReadResult) (*env, error) {
	if pl.Err != nil {
		return nil, fmt.Errorf("listing IP pools: %w", pl.Err)
	}
	var pools []v3.IPPool
	for _, r := range pl.List.Items {
		pools = append(pools, *r.(*v3.IPPool))
	}
	// An undecodable pool is skipped (the others still serve) and named
	// if no pool is left to use.
	e := &env{pools: ParsePools(pools), autoAllocate: true, badPools: pl.List.Bad}
	switch {
	case cfg.Err == nil:
		s := cfg.Object.(*v3.IPAMConfiguration).Spec
		e.strict = s.StrictAffinity
		e.maxBlocks = int(s.MaxBlocksPerHost)
		if s.AutoAllocateBlocks != nil {
			e.autoAllocate = *s.AutoAllocateBlocks
		}
	case !errors.Is(cfg.Err, datastore.ErrNotFound):
		return nil, fmt.Errorf("reading IPAMConfiguration: %w", cfg.Err)
	}
	if rl.Err != nil {
		return nil, fmt.Errorf("listing IP reservations: %w", rl.Err)
	}
	if err := rl.List.Complete(); err != nil {
		// What an unreadable reservation reserves cannot be known: handing
		// out addresses could give away a reserved one.
		return nil, fmt.Errorf("listing IP reservations: %w", err)
	}
	var rs []v3.IPReservation
	for _, r := range rl.List.Items {
		rs = append(rs, *r.(*v3.IPReservation))
	}
	e.reserved = ParseReservations(rs)
	return e, nil
}

// parseAffinities returns the node's confirmed block CIDRs among the listed
// affinities, newest claim first: older blocks fill first, so a fresh
// process most likely finds room in the first block it reads. Pending ones
// whose block exists with this node's affinity (a claim interrupted before
// its confirmation) are confirmed on the way.
func (a *Allocator) parseAffinities(ctx context.Context, node string, listed []v3.Resource) ([]netip.Prefix, error) {
	items := slices.Clone(listed)
	slices.SortStableFunc(items, func(x, y v3.Resource) int {
		if c := y.GetCreationTimestamp().Compare(x.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		// Timestamps have whole seconds: within one, the later write
		// (claims are confirmed in claim order) is the newer claim.
		rx, ex := strconv.ParseInt(x.GetResourceVersion(), 10, 64)
		ry, ey := strconv.ParseInt(y.GetResourceVersion(), 10, 64)
		if ex == nil && ey == nil && rx != ry {
			return cmp.Compare(ry, rx)
		}
		return strings.Compare(y.(*v3.BlockAffinity).Spec.CIDR, x.(*v3.BlockAffinity).Spec.CIDR)
	})
	var out []netip.Prefix
	for _, r := range items {
		ba := r.(*v3.BlockAffinity)
		if ba.Spec.Node != node || ba.Spec.Deleted || (ba.Spec.Type != "" && ba.Spec.Type != v3.BlockAffinityTypeHost) {
			continue
		}
		cidr, err := netip.ParsePrefix(ba.Spec.CIDR)
		if err != nil {
			continue
		}
		switch ba.Spec.State {
		case v3.BlockAffinityStateConfirmed:
			out = append(out, cidr)
		case v3.BlockAffinityStatePending:
			b, err := a.getBlock(ctx, cidr)
			if err != nil || b.Spec.Affinity == nil || *b.Spec.Affinity != AffinityValue(node) {
				continue // a claim in progress, or one that lost: not ours (yet)
			}
			// The interrupted claim may not have been checked for
			// overlapping blocks yet (overlap.go).
			if err := a.settleClaim(ctx, node, cidr, b); errors.Is(err, errBlockOverlaps) {
				continue
			} else if err != nil {
				return nil, err
			}
			if err := a.confirmAffinity(ctx, node, cidr, nil); errors.Is(err, errBlockOverlaps) {
				continue
			} else if err != nil {
				return nil, err
			}
			out = append(out, cidr)
		}
	}
	return out, nil
}

// prefetchBlocks reads, in one round trip, the block an allocation will
// try first in each address family: the first of cidrs (in try order) not
// known to be full, when it is not cached. The first write to it then needs
// no read of its own. Later blocks are read as they are tried: a node with
// many full blocks does not pay for decoding them all.
func (a *Allocator) prefetchBlocks(ctx context.Context, cidrs []netip.Prefix, reserved Reservations) error {
	var reqs []datastore.ReadRequest
	var which []netip.Prefix
	seen := map[bool]bool{} // is4 -> family settled
	a.mu.Lock()
	for _, c := range cidrs {
		fam := c.Addr().Is4()
		if seen[fam] {
			continue
		}
		b := a.blocks[c]
		if b != nil && FreeCount(b, reserved) == 0 {
			continue // full: the allocation skips it too
		}
		seen[fam] = true
		if b == nil {
			reqs = append(reqs, datastore.ReadRequest{Key: blockKey(c)})
			which = append(which, c)
		}
	}
	a.mu.Unlock()
	if len(reqs) == 0 {
		return nil
	}
	res, err := datastore.ReadMany(ctx, a.c, reqs)
	if err != nil {
		return fmt.Errorf("reading blocks: %w", err)
	}
	for i, r := range res {
		if r.Err == nil {
			a.storeBlock(which[i], r.Object.(*v3.IPAMBlock))
		}
	}
	return nil
}
