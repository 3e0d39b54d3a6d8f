package ipam

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// AutoAssignArgs asks for addresses chosen by IPAM.
type AutoAssignArgs struct {
	Num4, Num6 int
	// HandleID owns the addresses, e.g. k8s-pod-network.<containerID>.
	HandleID string
	// Attrs describe the owner: namespace, pod, node.
	Attrs map[string]string
	// Hostname is the node the addresses are for.
	Hostname string
	// IPv4Pools and IPv6Pools restrict the pools (names or CIDRs).
	IPv4Pools, IPv6Pools []string
	// Use is what the addresses are for [default Workload].
	Use v3.IPPoolAllowedUse
	// NamespaceLabels are the labels of the pod's namespace, checked
	// against pools' namespaceSelectors (nil: matched as no labels, as
	// Calico does when it has no namespace); Namespace names it in errors.
	NamespaceLabels map[string]string
	Namespace       string
}

// versionWant is what an AutoAssign asks of one IP version.
type versionWant struct {
	version   int
	n         int
	requested []string // pools asked for by name or CIDR
	pools     []Pool   // the pools chosen
}

// assigned is one address taken in a block, before the handle is written.
type assigned struct {
	ip    netip.Addr
	block netip.Prefix
}

// AutoAssign allocates Num4 IPv4 and Num6 IPv6 addresses for the handle on
// the node. Either all are allocated and recorded under the handle, or
// none is (what was taken is given back).
func (a *Allocator) AutoAssign(ctx context.Context, args AutoAssignArgs) ([]netip.Addr, error) {
	if args.HandleID == "" || args.Hostname == "" || args.Num4 < 0 || args.Num6 < 0 || args.Num4+args.Num6 == 0 {
		return nil, fmt.Errorf("auto-assign needs a handle, a node and at least one address: %w", ErrInvalidArgs)
	}
	e, labels, err := a.prepare(ctx, args.Hostname)
	if err != nil {
		return nil, err
	}
	want := []versionWant{{4, args.Num4, args.IPv4Pools, nil}, {6, args.Num6, args.IPv6Pools, nil}}
	var blocks []netip.Prefix
	for i, v := range want {
		if v.n == 0 {
			continue
		}
		pools, err := SelectPools(e.pools, PoolRequest{Version: v.version, Requested: v.requested, NodeLabels: labels, NamespaceLabels: args.NamespaceLabels, Namespace: args.Namespace, Use: args.Use})
		if err != nil {
			return nil, fmt.Errorf("choosing IPv%d pools for node %s: %w", v.version, args.Hostname, e.explain(err))
		}
		want[i].pools = pools
		affine, _, err := a.affineBlocks(ctx, args.Hostname, pools, false, false)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, affine...)
	}
	// Read the node's blocks not cached, for all versions in one round
	// trip (nothing when all are cached).
	if err := a.prefetchBlocks(ctx, blocks, e.reserved); err != nil {
		return nil, err
	}
	// When the cache tells which blocks the addresses will come from, the
	// handle is created alongside the block writes (handleahead.go).
	var ahead *handleAhead
	if counts := a.guessBlocks(args.Hostname, e.reserved, want); counts != nil {
		ahead = a.startHandle(ctx, args.HandleID, counts)
	}
	var done []assigned
	fail := func(err error) ([]netip.Addr, error) {
		a.rollback(ctx, args.HandleID, done)
		if ahead != nil {
			a.undo(ctx, args.HandleID, ahead)
		}
		return nil, err
	}
	// Without a guess, the handle is created once the first block write
	// is about to go (a block just claimed, or one read since): alongside
	// it, as with a guess.
	writing := func(cidr netip.Prefix, k int) {
		if ahead == nil {
			ahead = a.startHandle(ctx, args.HandleID, map[string]int{cidr.String(): k})
		}
	}
	for _, v := range want {
		if v.n == 0 {
			continue
		}
		got, err := a.assignVersion(ctx, e, args, v.pools, v.n, writing)
		done = append(done, got...)
		if err != nil {
			return fail(err)
		}
	}
	var err2 error
	if ahead != nil {
		err2 = a.finish(ctx, args.HandleID, ahead, done)
	} else {
		err2 = a.addToHandle(ctx, args.HandleID, done)
	}
	if err2 != nil {
		return fail(err2)
	}
	ips := make([]netip.Addr, len(done))
	for i, d := range done {
		ips[i] = d.ip
	}
	return ips, nil
}

// assignVersion takes n addresses from pools: the node's own blocks first,
// then a newly claimed block, then (without strict affinity) any block
// with room. writing is told of each block write about to be sent (the
// block and how many addresses it takes).
func (a *Allocator) assignVersion(ctx context.Context, e *env, args AutoAssignArgs, pools []Pool, n int, writing func(netip.Prefix, int)) ([]assigned, error) {
	node := args.Hostname
	var done []assigned
	// takeBlock allocates what is still missing from one block. mutate may
	// run several times (once per CAS attempt): only the last, written
	// attempt's addresses count.
	takeBlock := func(cidr netip.Prefix, mustBeAffine bool) error {
		var got []netip.Addr
		_, err := a.updateBlock(ctx, cidr, func(b *v3.IPAMBlock) error {
			got = nil
			if n-len(done) <= 0 {
				return errNothingToDo
			}
			if mustBeAffine && (b.Spec.Affinity == nil || *b.Spec.Affinity != AffinityValue(node)) {
				return errNotAffine
			}
			if FreeCount(b, e.reserved) == 0 {
				return errNoChange
			}
			got = AssignFromBlock(b, n-len(done), args.HandleID, args.Attrs, e.reserved)
			writing(cidr, len(got))
			return nil
		})
		switch {
		case errors.Is(err, errNotAffine) || errors.Is(err, datastore.ErrNotFound):
			if mustBeAffine {
				a.forgetAffinity(node, cidr)
			}
			return nil
		case err != nil:
			return err
		}
		for _, ip := range got {
			done = append(done, assigned{ip: ip, block: cidr})
		}
		return nil
	}
	refreshed, indexed := false, false
	claims := 0
	var early *claimReads
	defer func() { early.stop() }()
	var unlockClaims func() // while this allocation holds Config.ClaimLock
	defer func() {
		if unlockClaims != nil {
			unlockClaims()
		}
	}()
	stale := false // early's block names predate another process's claim
	for len(done) < n {
		blocks, listed, err := a.affineBlocks(ctx, node, pools, refreshed, stale)
		if err != nil {
			return done, err
		}
		refreshedNow := listed
		// Read the blocks not cached in one round trip, rather than one
		// each as they are tried (nothing when all are cached).
		if err := a.prefetchBlocks(ctx, blocks, e.reserved); err != nil {
			return done, err
		}
		// Blocks the cache says have room first: a node with many full
		// blocks then still allocates with one write, without re-reading
		// the full ones.
		slices.SortStableFunc(blocks, func(x, y netip.Prefix) int {
			return a.cachedFull(y, e.reserved) - a.cachedFull(x, e.reserved)
		})
		for _, cidr := range blocks {
			if len(done) == n {
				break
			}
			if err := takeBlock(cidr, true); err != nil {
				return done, err
			}
		}
		if len(done) == n {
			break
		}
		if !indexed && early == nil {
			// What a claim needs, read alongside the look below (or
			// before the claim): one round trip of latency, not three.
			early = a.startClaimReads(ctx, node)
		}
		if !refreshed && !refreshedNow {
			// Another process for this node may have claimed a block we do
			// not know about yet: look once more before claiming.
			refreshed = true
			continue
		}
		refreshed = true
		if !indexed {
			// Before claiming, or giving up: affinities written without the
			// per-node index are not among blocks yet.
			indexed = true
			if <-early.indexed {
				continue
			}
		}
		if !e.autoAllocate || (e.maxBlocks > 0 && len(blocks) >= e.maxBlocks) || claims > n {
			break
		}
		if a.cfg.ClaimLock != nil && unlockClaims == nil && claims == 0 {
			var waited bool
			unlockClaims, waited = a.cfg.ClaimLock(ctx, node)
			if waited {
				// The holder may have claimed a block for this node: look
				// again (refreshed: the loop reads the affinities).
				stale = true
				continue
			}
		}
		var known *existing
		if claims == 0 && early != nil && !stale {
			k := <-early.names
			known = &k
		}
		cidr, err := a.claimNewBlock(ctx, node, pools, known)
		if unlockClaims != nil {
			unlockClaims()
			unlockClaims = func() {} // one turn per allocation
		}
		if errors.Is(err, errNoFreeBlock) {
			break
		}
		if err != nil {
			return done, err
		}
		claims++
		if err := takeBlock(cidr, true); err != nil {
			return done, err
		}
	}
	if len(done) < n && !e.strict {
		if err := a.borrow(ctx, pools, e.reserved, func(cidr netip.Prefix) (bool, error) {
			err := takeBlock(cidr, false)
			return len(done) == n, err
		}); err != nil {
			return done, err
		}
	}
	if len(done) < n {
		return done, fmt.Errorf("no free address for node %s in pools %s (got %d of %d, strictAffinity=%v): %w",
			node, PoolNames(pools), len(done), n, e.strict, ErrPoolExhausted)
	}
	return done, nil
}

var errNotAffine = errors.New("block is not affine to this node")

// borrow offers each existing block of the pools with free addresses to
// take, until take reports it is satisfied.
func (a *Allocator) borrow(ctx context.Context, pools []Pool, reserved Reservations, take func(netip.Prefix) (bool, error)) error {
	l, err := a.c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing blocks to borrow from: %w", err)
	}
	listed := make([]*v3.IPAMBlock, len(l.Items))
	for i, r := range l.Items {
		listed[i] = r.(*v3.IPAMBlock)
	}
	// A block overlapping another (of an overlapping pool) is never lent:
	// it may be a claim about to be undone (overlap.go).
	listed = skipOverlapping(listed)
	for _, p := range pools {
		for _, b := range listed {
			cidr, err := BlockCIDR(b)
			if err != nil || !p.CIDR.Contains(cidr.Addr()) || FreeCount(b, reserved) == 0 {
				continue
			}
			a.storeBlock(cidr, b)
			ok, err := take(cidr)
			if err != nil {
				return err
			}
			if ok {
				return nil
			}
		}
	}
	return nil
}

// addToHandle records the addresses under the handle: one create for a new
// handle (the common case), else read-modify-CAS.
func (a *Allocator) addToHandle(ctx context.Context, handle string, done []assigned) error {
	if len(done) == 0 {
		return nil
	}
	counts := blockCounts(done)
	_, err := a.c.Create(ctx, newHandle(handle, counts))
	if err == nil {
		return nil
	}
	if !errors.Is(err, datastore.ErrAlreadyExists) {
		return fmt.Errorf("recording handle %s: %w", handle, err)
	}
	return a.changeHandle(ctx, handle, func(cur map[string]int) {
		for k, v := range counts {
			cur[k] += v
		}
	})
}

// changeHandle applies change to the handle's block counts with CAS,
// deleting the handle when no address is left.
func (a *Allocator) changeHandle(ctx context.Context, handle string, change func(map[string]int)) error {
	k := datastore.Key{Kind: v3.KindIPAMHandle, Name: HandleName(handle)}
	for attempt := 0; attempt < a.cfg.MaxRetries; attempt++ {
		r, err := a.c.Get(ctx, k)
		if errors.Is(err, datastore.ErrNotFound) {
			counts := map[string]int{}
			change(counts)
			clean(counts)
			if len(counts) == 0 {
				return nil
			}
			h := &v3.IPAMHandle{
				TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPAMHandle, APIVersion: v3.GroupVersion},
				ObjectMeta: metav1.ObjectMeta{Name: HandleName(handle)},
				Spec:       v3.IPAMHandleSpec{HandleID: handle, Block: counts},
			}
			if _, err = a.c.Create(ctx, h); err == nil {
				return nil
			}
		} else if err == nil {
			h := r.(*v3.IPAMHandle)
			if h.Spec.Block == nil {
				h.Spec.Block = map[string]int{}
			}
			change(h.Spec.Block)
			clean(h.Spec.Block)
			if len(h.Spec.Block) == 0 {
				_, err = a.c.Delete(ctx, k, datastore.DeleteOptions{ResourceVersion: h.ResourceVersion})
			} else {
				_, err = a.c.Update(ctx, h)
			}
			if err == nil || errors.Is(err, datastore.ErrNotFound) && len(h.Spec.Block) == 0 {
				return nil
			}
		}
		if !errors.Is(err, datastore.ErrConflict) && !errors.Is(err, datastore.ErrAlreadyExists) && !errors.Is(err, datastore.ErrNotFound) {
			return fmt.Errorf("updating handle %s: %w", handle, err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("updating handle %s: %w", handle, ErrTooManyRetries)
}

func clean(m map[string]int) {
	maps.DeleteFunc(m, func(_ string, v int) bool { return v <= 0 })
}

// rollback gives back addresses taken for handle before a later step
// failed. Only allocations still held by the handle are freed.
func (a *Allocator) rollback(ctx context.Context, handle string, done []assigned) {
	if len(done) == 0 {
		return
	}
	ctx, cancel := rollbackCtx(ctx)
	defer cancel()
	byBlock := map[netip.Prefix][]netip.Addr{}
	for _, d := range done {
		byBlock[d.block] = append(byBlock[d.block], d.ip)
	}
	for cidr, ips := range byBlock {
		if _, err := a.releaseInBlock(ctx, cidr, ips, handle, nil); err != nil {
			a.log.Error("rolling back an allocation failed; GC will reclaim it", "block", cidr, "handle", handle, "err", err)
		}
	}
}

// releaseInBlock frees ips in block cidr. With handle set, only
// allocations held by that handle; with seqs, only those whose sequence
// number still matches (so an address released and reassigned since is
// left alone).
func (a *Allocator) releaseInBlock(ctx context.Context, cidr netip.Prefix, ips []netip.Addr, handle string, seqs map[netip.Addr]uint64) ([]Allocated, error) {
	var freed []Allocated
	_, err := a.updateBlock(ctx, cidr, func(b *v3.IPAMBlock) error {
		var ords []int
		for _, ip := range ips {
			o, ok := IPToOrdinal(cidr, ip)
			if !ok {
				continue
			}
			al, ok := AllocationAt(b, cidr, o)
			if !ok || (handle != "" && al.Handle != handle) {
				continue
			}
			if s, ok := seqs[ip]; ok && s != al.Seq {
				continue
			}
			ords = append(ords, o)
		}
		if len(ords) == 0 {
			freed = nil
			return errNoChange
		}
		freed = ReleaseOrdinals(b, ords)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return freed, nil
}

// cachedFull is 0 when the cached copy of a block is full, 1 otherwise
// (including when it is not cached).
func (a *Allocator) cachedFull(cidr netip.Prefix, reserved Reservations) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b := a.blocks[cidr]; b != nil && FreeCount(b, reserved) == 0 {
		return 0
	}
	return 1
}
