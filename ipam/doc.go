// Package ipam is Tabby's Calico-style IP address management over the
// datastore client: IP pools are carved into blocks of blockSize, a node
// claims blocks (a BlockAffinity, claimed in two phases) and hands out
// addresses from its own blocks first, claims another block when they are
// full, and borrows single addresses from other nodes' blocks only when
// IPAMConfiguration strictAffinity is false. Every allocation carries a
// handle and owner attributes; an IPAMHandle counts a handle's addresses per
// block so everything a pod holds is released together.
//
// Layout: the pure core (blockmath.go, block.go, pools.go, reservations.go,
// annotations.go, and check.go: the consistency checks calicoctl ipam check
// prints) does address arithmetic and block bookkeeping on in-memory
// objects; the Allocator (allocator.go, assign.go, release.go,
// claim.go, blocks_gc.go) drives it over datastore.Client, where every
// write is a compare-and-swap retried with jitter on conflict, so
// correctness never rests on a lock or a cache; gc.go finds and frees
// allocations whose owners are gone. ipamtest holds the fake store;
// cniipam is the calico-ipam CNI plugin as a library.
//
// The block's Affinity field, set atomically when the block is created, is
// the single source of truth for which node owns a block: BlockAffinity
// objects are only confirmed after the block exists with that affinity.
package ipam
