package ipam

import (
	"fmt"
	"net/netip"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// CheckInput is what Check reads: the lists of blocks, handles, workload
// endpoints and IP pools, as the datastore returned them (undecodable
// records included, in List.Bad).
type CheckInput struct {
	Blocks, Handles, Endpoints, Pools *datastore.List
}

// Findings are the bookkeeping problems Check finds, each a sentence for
// people, sorted.
type Findings struct {
	// Inconsistencies: records that cannot be decoded, blocks failing
	// CheckBlock, handles whose per-block counts disagree with the blocks,
	// allocations without an IPAMHandle, endpoints using addresses IPAM
	// never allocated.
	Inconsistencies []string
	// Overlaps: stored pools overlapping each other and the blocks and
	// addresses that overlap because of them (CheckOverlaps).
	Overlaps []string
	// OutsidePools: blocks no IP pool contains (their pool was deleted or
	// changed while they held addresses): no node allocates from them, and
	// they go once their addresses are released.
	OutsidePools []string
}

// Check is the consistency check behind calicoctl ipam check, beside the
// leak check (CheckLeaks): each block's own structure, handles' counts
// against the blocks, endpoints' addresses against IPAM, overlapping
// pools and blocks, and blocks outside every pool. Pure.
func Check(in CheckInput) Findings {
	var f Findings
	for _, l := range []*datastore.List{in.Blocks, in.Handles, in.Endpoints, in.Pools} {
		for _, b := range l.Bad {
			f.Inconsistencies = append(f.Inconsistencies, b.Error())
		}
	}
	blocks := make([]*v3.IPAMBlock, 0, len(in.Blocks.Items))
	for _, r := range in.Blocks.Items {
		blocks = append(blocks, r.(*v3.IPAMBlock))
	}
	counts, allocated := blockUse(blocks)
	for _, b := range blocks {
		f.Inconsistencies = append(f.Inconsistencies, CheckBlock(b)...)
	}
	f.Inconsistencies = append(f.Inconsistencies, checkHandles(in.Handles.Items, counts)...)
	ps := make([]v3.IPPool, 0, len(in.Pools.Items))
	for _, r := range in.Pools.Items {
		ps = append(ps, *r.(*v3.IPPool))
	}
	pools := ParsePools(ps)
	f.Inconsistencies = append(f.Inconsistencies, checkEndpoints(in.Endpoints.Items, pools, allocated)...)
	f.Overlaps = append(poolOverlaps(ps), CheckOverlaps(blocks)...)
	f.OutsidePools = outsidePools(blocks, pools)
	slices.Sort(f.Inconsistencies)
	return f
}

// blockUse counts each handle's allocations per block and collects the
// allocated addresses.
func blockUse(blocks []*v3.IPAMBlock) (map[string]map[string]int, map[netip.Addr]bool) {
	counts := map[string]map[string]int{} // handle -> block -> allocations
	allocated := map[netip.Addr]bool{}
	for _, b := range blocks {
		cidr, err := BlockCIDR(b)
		if err != nil {
			continue
		}
		for _, al := range Allocations(b) {
			allocated[al.IP] = true
			if counts[al.Handle] == nil {
				counts[al.Handle] = map[string]int{}
			}
			counts[al.Handle][cidr.String()]++
		}
	}
	return counts, allocated
}

// checkHandles compares each IPAMHandle's per-block counts with what the
// blocks hold. A handle nothing uses is the leak check's (an orphan).
func checkHandles(handles []v3.Resource, counts map[string]map[string]int) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range handles {
		h := r.(*v3.IPAMHandle)
		seen[h.Spec.HandleID] = true
		got := counts[h.Spec.HandleID]
		if len(got) == 0 {
			continue
		}
		for blk, n := range h.Spec.Block {
			if n != 0 && got[blk] != n {
				out = append(out, fmt.Sprintf("handle %s records %d address(es) in block %s, the block holds %d", h.Spec.HandleID, n, blk, got[blk]))
			}
		}
		for blk, n := range got {
			if _, ok := h.Spec.Block[blk]; !ok {
				out = append(out, fmt.Sprintf("handle %s does not record block %s, which holds %d of its address(es)", h.Spec.HandleID, blk, n))
			}
		}
	}
	for h := range counts {
		if h != "" && !seen[h] {
			out = append(out, fmt.Sprintf("handle %s is used by allocations but has no IPAMHandle", h))
		}
	}
	return out
}

// checkEndpoints names endpoints using an address inside a pool that IPAM
// has not allocated.
func checkEndpoints(endpoints []v3.Resource, pools []Pool, allocated map[netip.Addr]bool) []string {
	var out []string
	for _, r := range endpoints {
		w := r.(*v3.WorkloadEndpoint)
		for _, n := range w.Spec.IPNetworks {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				continue
			}
			ip := p.Addr().Unmap()
			if _, inPool := PoolFor(pools, ip); inPool && !allocated[ip] {
				out = append(out, fmt.Sprintf("workload endpoint %s/%s uses %s, which IPAM has not allocated", w.Namespace, w.Name, ip))
			}
		}
	}
	return out
}

// poolOverlaps names stored pools that overlap each other (written past
// the datastore's check, or created at the same moment): the cause of
// overlapping blocks.
func poolOverlaps(ps []v3.IPPool) []string {
	var out []string
	var seen []*v3.IPPool
	for i := range ps {
		for _, fe := range v3.IPPoolOverlapErrors(&ps[i], seen) {
			out = append(out, fe.Msg)
		}
		seen = append(seen, &ps[i])
	}
	return out
}

// outsidePools names the blocks no pool contains, with what they hold.
func outsidePools(blocks []*v3.IPAMBlock, pools []Pool) []string {
	var out []string
	for _, b := range blocks {
		cidr, err := BlockCIDR(b)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(pools, func(p Pool) bool { return Inside(p.CIDR, cidr) }) {
			continue
		}
		owner := "no node"
		if b.Spec.Affinity != nil {
			owner = *b.Spec.Affinity
		}
		out = append(out, fmt.Sprintf("block %s (affinity %s) is in no IP pool and holds %d address(es)", cidr, owner, len(Allocations(b))))
	}
	slices.Sort(out)
	return out
}
