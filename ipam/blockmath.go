package ipam

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
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
// spread over the pool instead of all racing for block 0), that is not in
// taken. It inspects at most len(taken)+1 candidates, so it is cheap even for
// an IPv6 pool of 2^58 blocks. ok is false when every block is taken.
func NextBlock(pool netip.Prefix, blockBits int, node string, taken map[netip.Prefix]bool) (netip.Prefix, bool) {
	n := NumBlocks(pool, blockBits)
	if n == 0 {
		return netip.Prefix{}, false
	}
	h := fnv.New64a()
	h.Write([]byte(node))
	start := h.Sum64() % n
	limit := uint64(len(taken)) + 1
	if limit > n {
		limit = n
	}
	for i := uint64(0); i < limit; i++ {
		b := NthBlock(pool, blockBits, (start+i)%n)
		if !taken[b] {
			return b, true
		}
	}
	return netip.Prefix{}, false
}

var nameReplacer = strings.NewReplacer(".", "-", ":", "-", "/", "-")

// BlockName is the datastore name of a block's IPAMBlock, as Calico's
// Kubernetes backend names it: 10.244.3.64/26 -> 10-244-3-64-26.
func BlockName(block netip.Prefix) string {
	return nameReplacer.Replace(block.String())
}

// AffinityName is the datastore name of a node's BlockAffinity for a block.
func AffinityName(node string, block netip.Prefix) string {
	return node + "-" + BlockName(block)
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
