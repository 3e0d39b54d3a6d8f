package v3

import (
	"net/netip"
)

// The checks of an IPPool write that need the other pools (or the stored
// pool) and so cannot run in Validate. The datastore runs them on every
// create and update (datastore.CheckWrite); `calicoctl validate` runs
// IPPoolOverlapErrors across the documents it is given. Messages are
// Calico's (libcalico-go clientv3 ippool.go, validateAndSetDefaults).

// IPPoolOverlapErrors returns one error for each pool in others whose CIDR
// overlaps p's, in the order of others, as Calico refuses the create of an
// overlapping pool: "IPPool(new) CIDR overlaps with IPPool(other) CIDR
// 10.50.0.0/20". Like Calico it checks disabled pools too (a disabled pool
// keeps its blocks and may be re-enabled), skips a pool with p's own name
// (the create then fails as already existing) and pools whose CIDR does
// not parse (validation reports those).
func IPPoolOverlapErrors(p *IPPool, others []*IPPool) ErrorList {
	var errs ErrorList
	for _, o := range others {
		if o.Name == p.Name {
			continue
		}
		if PoolsOverlap(p, o) {
			errs.Addf(Path("spec.cidr"), "IPPool(%s) CIDR overlaps with IPPool(%s) CIDR %s", p.Name, o.Name, o.Spec.CIDR)
		}
	}
	return errs
}

// IPPoolBlockSizeErrors refuses a new pool over existing IPAM blocks of a
// different size (blocks of an earlier pool that still hold addresses):
// IPAM would claim blocks overlapping them. blocks are the CIDRs of the
// stored IPAMBlocks; p must be defaulted.
func IPPoolBlockSizeErrors(p *IPPool, blocks []string) ErrorList {
	pool, err := netip.ParsePrefix(p.Spec.CIDR)
	if err != nil {
		return nil
	}
	for _, s := range blocks {
		b, err := netip.ParsePrefix(s)
		if err != nil || b.Addr().Is4() != pool.Addr().Is4() {
			continue
		}
		if b.Bits() != p.Spec.BlockSize && b.Overlaps(pool) {
			var errs ErrorList
			errs.Add(Path("spec.blockSize"), "IPPool blocksSize conflicts with existing allocations that use a different blockSize")
			return errs
		}
	}
	return nil
}

// IPPoolUpdateErrors refuses an update that changes a pool's CIDR or block
// size, which Calico fixes at creation: the pool's blocks are cut to its
// block size, and a CIDR changed in place could overlap another pool
// without the create-time check. A CIDR written differently but naming the
// same network (an unmasked or uncompressed form stored by an older
// client) is not a change. Both pools must be defaulted.
func IPPoolUpdateErrors(old, updated *IPPool) ErrorList {
	var errs ErrorList
	if !sameCIDR(old.Spec.CIDR, updated.Spec.CIDR) {
		errs.Addf(Path("spec.cidr"), "IPPool CIDR cannot be modified (stored %s, got %s): create a new pool and disable this one instead", old.Spec.CIDR, updated.Spec.CIDR)
	}
	if old.Spec.BlockSize != updated.Spec.BlockSize {
		errs.Addf(Path("spec.blockSize"), "IPPool BlockSize cannot be modified (stored %d, got %d)", old.Spec.BlockSize, updated.Spec.BlockSize)
	}
	return errs
}

func sameCIDR(a, b string) bool {
	if a == b {
		return true
	}
	pa, errA := netip.ParsePrefix(a)
	pb, errB := netip.ParsePrefix(b)
	return errA == nil && errB == nil && pa.Masked() == pb.Masked()
}
