package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// AssignIPArgs asks for one specific address.
type AssignIPArgs struct {
	IP       netip.Addr
	HandleID string
	Attrs    map[string]string
	Hostname string
}

// AssignIP allocates a specific address (the ipAddrs annotation). The
// address must be in an enabled pool and not reserved; its block is claimed
// for the node when nobody has claimed it yet.
func (a *Allocator) AssignIP(ctx context.Context, args AssignIPArgs) error {
	ip := args.IP.Unmap()
	if !ip.IsValid() || args.HandleID == "" || args.Hostname == "" {
		return fmt.Errorf("assign-ip needs an address, a handle and a node: %w", ErrInvalidArgs)
	}
	e, err := a.loadEnv(ctx)
	if err != nil {
		return err
	}
	pool, ok := PoolFor(e.pools, ip)
	if !ok {
		return fmt.Errorf("%s: %w (pools: %s)", ip, ErrNotInPool, PoolNames(e.pools))
	}
	if pool.Spec.Disabled {
		return fmt.Errorf("%s is in pool %s: %w", ip, pool.Name, ErrPoolDisabled)
	}
	if e.reserved.Contains(ip) {
		return fmt.Errorf("%s: %w by an IPReservation", ip, ErrReserved)
	}
	cidr, err := a.blockForAssign(ctx, ip, pool)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		_, err = a.updateBlock(ctx, cidr, func(b *v3.IPAMBlock) error {
			return AssignOrdinal(b, ip, args.HandleID, args.Attrs)
		})
		if !errors.Is(err, datastore.ErrNotFound) || attempt >= 2 {
			break
		}
		if cerr := a.claim(ctx, args.Hostname, cidr); cerr != nil && !errors.Is(cerr, errBlockTaken) {
			return cerr
		}
	}
	if err != nil {
		return fmt.Errorf("assigning %s to node %s: %w", ip, args.Hostname, err)
	}
	done := []assigned{{ip: ip, block: cidr}}
	if err := a.addToHandle(ctx, args.HandleID, done); err != nil {
		a.rollback(ctx, args.HandleID, done)
		return err
	}
	return nil
}

// ReleaseByHandle frees every address of the handle and deletes it. When
// the handle record is missing (e.g. an ADD that crashed between writing
// the block and the handle) it scans the blocks for allocations carrying
// the handle; ErrHandleNotFound when there are none (callers doing an
// idempotent delete ignore it).
func (a *Allocator) ReleaseByHandle(ctx context.Context, handle string) ([]netip.Addr, error) {
	k := datastore.Key{Kind: v3.KindIPAMHandle, Name: HandleName(handle)}
	var released []netip.Addr
	for attempt := 0; attempt < a.cfg.MaxRetries; attempt++ {
		r, err := a.c.Get(ctx, k)
		if errors.Is(err, datastore.ErrNotFound) {
			ips, err := a.releaseHandleByScan(ctx, handle)
			released = append(released, ips...)
			if err == nil && len(released) == 0 {
				return nil, fmt.Errorf("handle %s: %w", handle, ErrHandleNotFound)
			}
			return released, err
		}
		if err != nil {
			return released, fmt.Errorf("reading handle %s: %w", handle, err)
		}
		h := r.(*v3.IPAMHandle)
		blocks := make([]string, 0, len(h.Spec.Block))
		for c := range h.Spec.Block {
			blocks = append(blocks, c)
		}
		slices.Sort(blocks)
		counted, found := 0, 0
		for _, c := range blocks {
			counted += h.Spec.Block[c]
			cidr, err := netip.ParsePrefix(c)
			if err != nil {
				continue
			}
			ips, err := a.releaseHandleInBlock(ctx, cidr, handle)
			if err != nil {
				return released, err
			}
			found += len(ips)
			released = append(released, ips...)
		}
		if found < counted {
			// The record disagrees with the blocks (an ADD that failed
			// half-way, e.g. after its handle create timed out): look
			// for the handle's allocations everywhere before dropping it.
			ips, err := a.releaseHandleByScan(ctx, handle)
			released = append(released, ips...)
			if err != nil {
				return released, err
			}
		}
		_, err = a.c.Delete(ctx, k, datastore.DeleteOptions{ResourceVersion: h.ResourceVersion})
		if err == nil || errors.Is(err, datastore.ErrNotFound) {
			return released, nil
		}
		if !errors.Is(err, datastore.ErrConflict) {
			return released, fmt.Errorf("deleting handle %s: %w", handle, err)
		}
		// The handle gained addresses meanwhile: release those too.
		if err := backoff(ctx, attempt); err != nil {
			return released, err
		}
	}
	return released, fmt.Errorf("releasing handle %s: %w", handle, ErrTooManyRetries)
}

func (a *Allocator) releaseHandleByScan(ctx context.Context, handle string) ([]netip.Addr, error) {
	l, err := a.c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing blocks to release handle %s: %w", handle, err)
	}
	var released []netip.Addr
	for _, r := range l.Items {
		b := r.(*v3.IPAMBlock)
		if !slices.ContainsFunc(b.Spec.Attributes, func(at v3.AllocationAttribute) bool {
			return at.HandleID != nil && *at.HandleID == handle
		}) {
			continue
		}
		cidr, err := BlockCIDR(b)
		if err != nil {
			continue
		}
		ips, err := a.releaseHandleInBlock(ctx, cidr, handle)
		if err != nil {
			return released, err
		}
		released = append(released, ips...)
	}
	return released, nil
}

// releaseHandleInBlock frees the handle's addresses in one block (none, and
// no write, when it holds none there; a missing block holds none).
func (a *Allocator) releaseHandleInBlock(ctx context.Context, cidr netip.Prefix, handle string) ([]netip.Addr, error) {
	var freed []Allocated
	_, err := a.updateBlock(ctx, cidr, func(b *v3.IPAMBlock) error {
		freed = ReleaseHandle(b, handle)
		if len(freed) == 0 {
			return errNoChange
		}
		return nil
	})
	if err != nil && !errors.Is(err, datastore.ErrNotFound) {
		return nil, fmt.Errorf("releasing handle %s: %w", handle, err)
	}
	ips := make([]netip.Addr, len(freed))
	for i, f := range freed {
		ips[i] = f.IP
	}
	return ips, nil
}

// ReleaseIPs frees addresses whoever holds them and updates their handles.
// It returns the addresses that were allocated and are now free; an address
// outside every pool and block is ErrNotInPool.
func (a *Allocator) ReleaseIPs(ctx context.Context, ips ...netip.Addr) ([]netip.Addr, error) {
	return a.release(ctx, ips, nil)
}

func (a *Allocator) release(ctx context.Context, ips []netip.Addr, seqs map[netip.Addr]uint64) ([]netip.Addr, error) {
	e, err := a.loadEnv(ctx)
	if err != nil {
		return nil, err
	}
	byBlock := map[netip.Prefix][]netip.Addr{}
	var order []netip.Prefix
	var blocks []netip.Prefix // listed lazily for addresses outside every pool
	for _, ip := range ips {
		ip = ip.Unmap()
		var cidr netip.Prefix
		if p, ok := PoolFor(e.pools, ip); ok {
			cidr = BlockFor(ip, p.BlockBits())
		} else {
			if blocks == nil {
				l, err := a.c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
				if err != nil {
					return nil, fmt.Errorf("listing blocks: %w", err)
				}
				blocks = []netip.Prefix{}
				for _, r := range l.Items {
					if c, err := BlockCIDR(r.(*v3.IPAMBlock)); err == nil {
						blocks = append(blocks, c)
					}
				}
			}
			i := slices.IndexFunc(blocks, func(c netip.Prefix) bool { return c.Contains(ip) })
			if i < 0 {
				return nil, fmt.Errorf("releasing %s: %w", ip, ErrNotInPool)
			}
			cidr = blocks[i]
		}
		if _, ok := byBlock[cidr]; !ok {
			order = append(order, cidr)
		}
		byBlock[cidr] = append(byBlock[cidr], ip)
	}
	var released []netip.Addr
	for _, cidr := range order {
		freed, err := a.releaseInBlock(ctx, cidr, byBlock[cidr], "", seqs)
		if errors.Is(err, datastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return released, err
		}
		perHandle := map[string]int{}
		for _, f := range freed {
			released = append(released, f.IP)
			perHandle[f.Handle]++
		}
		for h, n := range perHandle {
			if h == "" {
				continue
			}
			if err := a.changeHandle(ctx, h, func(m map[string]int) { m[cidr.String()] -= n }); err != nil {
				return released, err
			}
		}
	}
	return released, nil
}

// IPsByHandle returns the addresses the handle holds, in block order.
func (a *Allocator) IPsByHandle(ctx context.Context, handle string) ([]netip.Addr, error) {
	r, err := a.c.Get(ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: HandleName(handle)})
	if errors.Is(err, datastore.ErrNotFound) {
		return nil, fmt.Errorf("handle %s: %w", handle, ErrHandleNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading handle %s: %w", handle, err)
	}
	h := r.(*v3.IPAMHandle)
	blocks := make([]string, 0, len(h.Spec.Block))
	for c := range h.Spec.Block {
		blocks = append(blocks, c)
	}
	slices.Sort(blocks)
	var out []netip.Addr
	for _, c := range blocks {
		cidr, err := netip.ParsePrefix(c)
		if err != nil {
			continue
		}
		b, err := a.getBlock(ctx, cidr)
		if errors.Is(err, datastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading block %s: %w", cidr, err)
		}
		for _, al := range Allocations(b) {
			if al.Handle == handle {
				out = append(out, al.IP)
			}
		}
	}
	return out, nil
}

// Allocation is one allocation with its block, as listed for GC callers.
type Allocation struct {
	Allocated
	Block netip.Prefix
}

// ListAllocations lists every allocation whose attributes match filter
// (nil matches all).
func (a *Allocator) ListAllocations(ctx context.Context, filter func(Allocated) bool) ([]Allocation, error) {
	l, err := a.c.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing blocks: %w", err)
	}
	var out []Allocation
	for _, r := range l.Items {
		b := r.(*v3.IPAMBlock)
		cidr, err := BlockCIDR(b)
		if err != nil {
			continue
		}
		for _, al := range Allocations(b) {
			if filter == nil || filter(al) {
				out = append(out, Allocation{Allocated: al, Block: cidr})
			}
		}
	}
	return out, nil
}

// Usable says whether at least one enabled pool exists for workloads (for
// a CNI STATUS check); it also proves the datastore answers.
func (a *Allocator) Usable(ctx context.Context) error {
	e, err := a.loadEnv(ctx)
	if err != nil {
		return err
	}
	for _, p := range e.pools {
		if !p.Spec.Disabled && p.allows(v3.IPPoolAllowedUseWorkload) {
			return nil
		}
	}
	return e.explain(fmt.Errorf("no enabled IP pool for workloads: %w", ErrNoPool))
}
