package ipam

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// u128 is an address as a 128-bit number (IPv4 addresses use the low 32
// bits), so block arithmetic is the same code for both families.
type u128 struct{ hi, lo uint64 }

func toU128(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{hi: binary.BigEndian.Uint64(b[:8]), lo: binary.BigEndian.Uint64(b[8:])}
}

func fromU128(v u128, is4 bool) netip.Addr {
	if is4 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(v.lo))
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], v.hi)
	binary.BigEndian.PutUint64(b[8:], v.lo)
	return netip.AddrFrom16(b)
}

func (v u128) add(n uint64) u128 {
	lo := v.lo + n
	hi := v.hi
	if lo < v.lo {
		hi++
	}
	return u128{hi, lo}
}

func (v u128) plus(w u128) u128 {
	lo := v.lo + w.lo
	hi := v.hi + w.hi
	if lo < v.lo {
		hi++
	}
	return u128{hi, lo}
}

func (v u128) cmp(w u128) int {
	switch {
	case v.hi != w.hi:
		return cmp.Compare(v.hi, w.hi)
	default:
		return cmp.Compare(v.lo, w.lo)
	}
}

func (v u128) sub(w u128) u128 {
	lo := v.lo - w.lo
	hi := v.hi - w.hi
	if v.lo < w.lo {
		hi--
	}
	return u128{hi, lo}
}

func (v u128) shl(n uint) u128 {
	switch {
	case n == 0:
		return v
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{hi: v.lo << (n - 64)}
	default:
		return u128{hi: v.hi<<n | v.lo>>(64-n), lo: v.lo << n}
	}
}

func (v u128) shr(n uint) u128 {
	switch {
	case n == 0:
		return v
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{lo: v.hi >> (n - 64)}
	default:
		return u128{hi: v.hi >> n, lo: v.lo>>n | v.hi<<(64-n)}
	}
}

// BlockSizeOf is the number of addresses in a block prefix.
func BlockSizeOf(block netip.Prefix) int {
	return 1 << (block.Addr().BitLen() - block.Bits())
}

// OrdinalToIP returns the address at ordinal o of block.
func OrdinalToIP(block netip.Prefix, o int) netip.Addr {
	a := block.Masked().Addr()
	return fromU128(toU128(a).add(uint64(o)), a.Is4())
}

// IPToOrdinal returns the ordinal of ip in block, or false when ip is not
// in block.
func IPToOrdinal(block netip.Prefix, ip netip.Addr) (int, bool) {
	ip = ip.Unmap()
	if !block.Contains(ip) {
		return 0, false
	}
	return int(toU128(ip).sub(toU128(block.Masked().Addr())).lo), true
}

// BlockFor returns the block of the given prefix length holding ip.
func BlockFor(ip netip.Addr, blockBits int) netip.Prefix {
	p, _ := ip.Unmap().Prefix(blockBits)
	return p
}

// NumBlocks returns how many blocks of blockBits a pool holds, capped at
// 2^62 (an IPv6 /64 of /122 blocks has 2^58; the cap only keeps the
// arithmetic in range).
func NumBlocks(pool netip.Prefix, blockBits int) uint64 {
	d := blockBits - pool.Bits()
	if d < 0 {
		return 0
	}
	if d > 62 {
		d = 62
	}
	return 1 << uint(d)
}

// NthBlock returns block n (0-based) of the pool.
func NthBlock(pool netip.Prefix, blockBits int, n uint64) netip.Prefix {
	base := pool.Masked().Addr()
	step := u128{lo: n}.shl(uint(base.BitLen() - blockBits))
	b := toU128(base)
	sum := u128{lo: b.lo + step.lo, hi: b.hi + step.hi}
	if sum.lo < b.lo {
		sum.hi++
	}
	return netip.PrefixFrom(fromU128(sum, base.Is4()), blockBits)
}

// BlockIndex returns the index of block within pool (the inverse of
// NthBlock).
func BlockIndex(pool netip.Prefix, block netip.Prefix) uint64 {
	d := toU128(block.Masked().Addr()).sub(toU128(pool.Masked().Addr()))
	return d.shr(uint(block.Addr().BitLen() - block.Bits())).lo
}

// NextBlock picks the block a node should claim next from pool: the first
// block, starting at a position derived from the node's name (so nodes
// spread over the pool instead of all racing for block 0), that overlaps
// no prefix in taken. taken holds the existing blocks of every pool, of any
// size: a block of an overlapping pool with another block size has another
// key, so only this check (and the check after the claim, see claim.go)
// keeps the two from sharing addresses. Candidates inside a taken prefix
// are skipped in one step, so it inspects O(len(taken)) candidates and is
// cheap even for an IPv6 pool of 2^58 blocks. ok is false when every block
// is taken.
func NextBlock(pool netip.Prefix, blockBits int, node string, taken map[netip.Prefix]bool) (netip.Prefix, bool) {
	n := NumBlocks(pool, blockBits)
	if n == 0 {
		return netip.Prefix{}, false
	}
	h := fnv.New64a()
	h.Write([]byte(node))
	i := h.Sum64() % n
	used := newSpans(pool, taken)
	hostBits := uint(pool.Addr().BitLen() - blockBits)
	base := toU128(pool.Masked().Addr())
	for visited := uint64(0); visited < n; {
		b := NthBlock(pool, blockBits, i)
		first := toU128(b.Addr())
		last, ok := used.overlapEnd(first, first.plus(u128{lo: 1}.shl(hostBits)).sub(u128{lo: 1}))
		if !ok {
			return b, true
		}
		// Resume at the first block after everything overlapping b.
		idx := last.sub(base).shr(hostBits)
		next := idx.lo + 1
		if idx.hi != 0 || next <= i || next >= n {
			visited += n - i
			i = 0
			continue
		}
		visited += next - i
		i = next
	}
	return netip.Prefix{}, false
}

// OverlappingBlocks returns the pairs of distinct prefixes among blocks
// that share addresses (blocks of overlapping pools with different block
// sizes, or a block written with a wrong CIDR), each pair ordered and the
// pairs sorted, for reports.
func OverlappingBlocks(blocks []netip.Prefix) [][2]netip.Prefix {
	sorted := make([]netip.Prefix, 0, len(blocks))
	for _, b := range blocks {
		sorted = append(sorted, b.Masked())
	}
	slices.SortFunc(sorted, comparePrefix)
	sorted = slices.Compact(sorted)
	var out [][2]netip.Prefix
	// Sorted by first address, then larger first: a block overlaps a later
	// one exactly when it contains the later one's first address.
	for i, b := range sorted {
		for _, c := range sorted[i+1:] {
			if !b.Contains(c.Addr()) {
				break // nor any later one (IPv6 sorts after IPv4)
			}
			out = append(out, [2]netip.Prefix{b, c})
		}
	}
	return out
}

// comparePrefix orders prefixes IPv4 first, by first address, then larger
// (shorter prefix) first.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// spans are the address ranges of a set of prefixes, sorted by first
// address, with the furthest last address up to each: which of them
// overlap a range is a binary search.
type spans struct {
	first, reach []u128
}

func newSpans(pool netip.Prefix, taken map[netip.Prefix]bool) spans {
	type span struct{ first, last u128 }
	var all []span
	for p := range taken {
		if !p.IsValid() || p.Addr().Is4() != pool.Addr().Is4() || !p.Overlaps(pool) {
			continue
		}
		first := toU128(p.Masked().Addr())
		size := u128{lo: 1}.shl(uint(p.Addr().BitLen() - p.Bits()))
		all = append(all, span{first, first.plus(size).sub(u128{lo: 1})})
	}
	slices.SortFunc(all, func(a, b span) int { return a.first.cmp(b.first) })
	s := spans{first: make([]u128, len(all)), reach: make([]u128, len(all))}
	for i, sp := range all {
		s.first[i] = sp.first
		s.reach[i] = sp.last
		if i > 0 && s.reach[i-1].cmp(sp.last) > 0 {
			s.reach[i] = s.reach[i-1]
		}
	}
	return s
}

// overlapEnd reports whether any span overlaps [first, last] and, if so,
// the furthest last address of those that do.
func (s spans) overlapEnd(first, last u128) (u128, bool) {
	// Spans starting at or before last; the furthest reach among them
	// overlaps the range exactly when it gets to first.
	k, _ := slices.BinarySearchFunc(s.first, last, func(e, t u128) int {
		if e.cmp(t) <= 0 {
			return -1
		}
		return 1
	})
	if k == 0 || s.reach[k-1].cmp(first) < 0 {
		return u128{}, false
	}
	return s.reach[k-1], true
}

var nameReplacer = strings.NewReplacer(".", "-", ":", "-", "/", "-")

// BlockName is the datastore name of a block's IPAMBlock, as Calico's
// Kubernetes backend names it: 10.244.3.64/26 -> 10-244-3-64-26.
func BlockName(block netip.Prefix) string {
	return nameReplacer.Replace(block.String())
}

// AffinityName is the datastore name of a node's BlockAffinity for a
// block, as Calico's Kubernetes backend names it: <node>-<block name>, or,
// when that would be 253 characters or more (too long for an object
// name), the node name cut short, the block name, and the first 11 hex
// digits of sha256("<node>+<block name>") to keep it unique.
func AffinityName(node string, block netip.Prefix) string {
	bn := BlockName(block)
	name := node + "-" + bn
	if len(name) < 253 {
		return name
	}
	sum := sha256.Sum256([]byte(node + "+" + bn))
	return node[:252-len(bn)-13] + "-" + bn + "-" + hex.EncodeToString(sum[:])[:11]
}

// HandleName is the datastore name of a handle's IPAMHandle: the handle
// lowercased (Calico's form), or, when that is not a valid object name, a
// hash of it. The handle itself is kept in spec.handleID.
func HandleName(handle string) string {
	n := strings.ToLower(handle)
	if len(k8svalidation.IsDNS1123Subdomain(n)) == 0 {
		return n
	}
	h := fnv.New64a()
	h.Write([]byte(handle))
	return fmt.Sprintf("handle-%016x", h.Sum64())
}

// AffinityValue is the block affinity string of a node: host:<node>.
func AffinityValue(node string) string { return "host:" + node }
