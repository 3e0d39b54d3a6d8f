package ipam

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func TestOrdinalRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		block string
		ord   int
		ip    string
	}{
		{"10.244.3.64/26", 0, "10.244.3.64"},
		{"10.244.3.64/26", 63, "10.244.3.127"},
		{"10.0.0.0/20", 4095, "10.0.15.255"},
		{"10.0.0.0/20", 256, "10.0.1.0"},
		{"fd00::/122", 0, "fd00::"},
		{"fd00::/122", 63, "fd00::3f"},
		{"fd00:0:0:1:ffff:ffff:ffff:ff00/120", 255, "fd00::1:ffff:ffff:ffff:ffff"},
		{"192.168.1.5/32", 0, "192.168.1.5"},
	} {
		t.Run(tc.block, func(t *testing.T) {
			b := netip.MustParsePrefix(tc.block)
			if got := OrdinalToIP(b, tc.ord).String(); got != tc.ip {
				t.Errorf("OrdinalToIP(%d) = %s, want %s", tc.ord, got, tc.ip)
			}
			o, ok := IPToOrdinal(b, netip.MustParseAddr(tc.ip))
			if !ok || o != tc.ord {
				t.Errorf("IPToOrdinal(%s) = %d,%v, want %d", tc.ip, o, ok, tc.ord)
			}
		})
	}
	if _, ok := IPToOrdinal(netip.MustParsePrefix("10.0.0.0/26"), netip.MustParseAddr("10.0.0.64")); ok {
		t.Error("address outside the block got an ordinal")
	}
}

func TestBlocksOfPool(t *testing.T) {
	for _, tc := range []struct {
		pool  string
		bits  int
		n     uint64
		nth   uint64
		block string
	}{
		{"10.244.0.0/16", 26, 1024, 0, "10.244.0.0/26"},
		{"10.244.0.0/16", 26, 1024, 5, "10.244.1.64/26"},
		{"10.244.0.0/16", 26, 1024, 1023, "10.244.255.192/26"},
		{"10.0.0.0/24", 24, 1, 0, "10.0.0.0/24"},
		{"fd00::/64", 122, 1 << 58, 1, "fd00::40/122"},
		{"fd00::/64", 122, 1 << 58, 1<<58 - 1, "fd00::ffff:ffff:ffff:ffc0/122"},
		{"fd00::/48", 116, 1 << 62, 1 << 16, "fd00::1000:0/116"},
	} {
		t.Run(tc.pool+"/"+tc.block, func(t *testing.T) {
			p := netip.MustParsePrefix(tc.pool)
			if n := NumBlocks(p, tc.bits); n != tc.n {
				t.Errorf("NumBlocks = %d, want %d", n, tc.n)
			}
			b := NthBlock(p, tc.bits, tc.nth)
			if b.String() != tc.block {
				t.Errorf("NthBlock(%d) = %s, want %s", tc.nth, b, tc.block)
			}
			if i := BlockIndex(p, b); i != tc.nth {
				t.Errorf("BlockIndex = %d, want %d", i, tc.nth)
			}
			ip := OrdinalToIP(b, 3)
			if got := BlockFor(ip, tc.bits); got != b {
				t.Errorf("BlockFor(%s) = %s, want %s", ip, got, b)
			}
		})
	}
}

func TestNextBlock(t *testing.T) {
	pool := netip.MustParsePrefix("10.0.0.0/24")
	taken := map[netip.Prefix]bool{}
	seen := map[netip.Prefix]bool{}
	for i := range 4 {
		b, ok := NextBlock(pool, 26, "node-a", taken)
		if !ok {
			t.Fatalf("claim %d: no block left", i)
		}
		if seen[b] || !pool.Contains(b.Addr()) || b.Bits() != 26 {
			t.Fatalf("claim %d: bad block %s", i, b)
		}
		seen[b], taken[b] = true, true
	}
	if b, ok := NextBlock(pool, 26, "node-a", taken); ok {
		t.Fatalf("got %s from a full pool", b)
	}
	// Different nodes start at different places in a big pool.
	big := netip.MustParsePrefix("10.0.0.0/8")
	a, _ := NextBlock(big, 26, "node-a", nil)
	b, _ := NextBlock(big, 26, "node-b", nil)
	if a == b {
		t.Errorf("node-a and node-b both start at %s", a)
	}
	// An IPv6 pool of 2^58 blocks is cheap.
	v6 := netip.MustParsePrefix("fd00::/64")
	if c, ok := NextBlock(v6, 122, "n", map[netip.Prefix]bool{}); !ok || !v6.Contains(c.Addr()) {
		t.Errorf("v6 NextBlock = %s %v", c, ok)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{BlockName(netip.MustParsePrefix("10.244.3.64/26")), "10-244-3-64-26"},
		{BlockName(netip.MustParsePrefix("fd00::40/122")), "fd00--40-122"},
		{AffinityName("node-1", netip.MustParsePrefix("10.0.0.0/26")), "node-1-10-0-0-0-26"},
		// Too long for an object name: cut and hashed as Calico does.
		{AffinityName(strings.Repeat("a", 250), netip.MustParsePrefix("10.0.0.0/26")), strings.Repeat("a", 228) + "-10-0-0-0-26-8f7e6ea6753"},
		{HandleName("k8s-pod-network.ABC123"), "k8s-pod-network.abc123"},
		{HandleName("Bad_Handle!"), HandleName("Bad_Handle!")},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if n := HandleName("Bad_Handle!"); n[:7] != "handle-" {
		t.Errorf("invalid handle name not hashed: %q", n)
	}
}

// nextBlockOracle is NextBlock by brute force: every candidate from the
// node's start position, in order, checked against every taken prefix.
func nextBlockOracle(pool netip.Prefix, blockBits int, node string, taken map[netip.Prefix]bool) (netip.Prefix, bool) {
	n := NumBlocks(pool, blockBits)
	first, _ := NextBlock(pool, blockBits, node, nil)
	start := BlockIndex(pool, first)
	for i := range n {
		b := NthBlock(pool, blockBits, (start+i)%n)
		free := true
		for p := range taken {
			if p.Overlaps(b) {
				free = false
			}
		}
		if free {
			return b, true
		}
	}
	return netip.Prefix{}, false
}

// TestNextBlockSkipsOverlappingBlocks: blocks of any size, in or around
// the pool, are never overlapped by the block chosen, and the choice is
// the first free one from the node's start (checked against brute force).
func TestNextBlockSkipsOverlappingBlocks(t *testing.T) {
	fixed := []struct {
		name  string
		pool  string
		bits  int
		taken []string
		want  string // "" = none left
	}{
		{"a larger block covers the pool", "10.50.0.0/24", 28, []string{"10.50.0.0/20"}, ""},
		{"a larger block covers the start", "10.50.0.0/20", 28, []string{"10.50.0.0/24"}, "10.50.1.0/28"},
		{"a smaller block inside the start", "10.50.0.0/20", 24, []string{"10.50.0.16/28"}, "10.50.1.0/24"},
		{"skips wrap to the pool's start", "10.50.0.0/22", 24, []string{"10.50.3.0/24", "10.50.0.0/32"}, "10.50.1.0/24"},
	}
	for _, tc := range fixed {
		t.Run(tc.name, func(t *testing.T) {
			pool := netip.MustParsePrefix(tc.pool)
			taken := map[netip.Prefix]bool{}
			for _, s := range tc.taken {
				taken[netip.MustParsePrefix(s)] = true
			}
			// A node that starts at the pool's first block, or at its
			// last for the wrap case.
			startAt := NthBlock(pool, tc.bits, 0)
			if strings.Contains(tc.name, "wrap") {
				startAt = NthBlock(pool, tc.bits, NumBlocks(pool, tc.bits)-1)
			}
			node := nodeStartingAt(t, "n", pool, tc.bits, startAt)
			got, ok := NextBlock(pool, tc.bits, node, taken)
			if tc.want == "" {
				if ok {
					t.Fatalf("got %s, want none", got)
				}
				return
			}
			if !ok || got != netip.MustParsePrefix(tc.want) {
				t.Fatalf("got %s %v, want %s", got, ok, tc.want)
			}
		})
	}

	rng := rand.New(rand.NewPCG(19, 2))
	pools := []struct {
		pool string
		bits int
	}{{"10.50.0.0/20", 24}, {"10.50.0.0/24", 28}, {"10.50.0.0/22", 26}, {"fd00::/112", 122}, {"fd00::/116", 124}}
	for iter := range 3000 {
		pc := pools[iter%len(pools)]
		pool := netip.MustParsePrefix(pc.pool)
		taken := map[netip.Prefix]bool{}
		for range rng.IntN(12) {
			// Any size from 4 bits larger than the pool to a single address.
			bits := pool.Bits() - 4 + rng.IntN(pool.Addr().BitLen()-pool.Bits()+5)
			ord := rng.IntN(1 << (pool.Addr().BitLen() - pool.Bits()))
			p, _ := OrdinalToIP(pool, ord).Prefix(bits)
			taken[p] = true
		}
		node := fmt.Sprintf("node-%d", rng.IntN(1000))
		got, ok := NextBlock(pool, pc.bits, node, taken)
		want, wantOK := nextBlockOracle(pool, pc.bits, node, taken)
		if got != want || ok != wantOK {
			t.Fatalf("pool %s/%d node %s taken %v: got %s %v, want %s %v", pool, pc.bits, node, taken, got, ok, want, wantOK)
		}
	}
}

func TestOverlappingBlocks(t *testing.T) {
	ps := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	tests := []struct {
		name   string
		blocks []netip.Prefix
		want   string
	}{
		{"none", ps("10.0.0.0/26", "10.0.0.64/26", "fd00::/122"), "[]"},
		{"different sizes", ps("10.50.0.0/28", "10.50.0.0/24", "10.50.1.0/24"), "[[10.50.0.0/24 10.50.0.0/28]]"},
		{"one contains several", ps("10.50.0.16/28", "10.50.0.0/24", "10.50.0.240/28", "10.50.1.0/28"),
			"[[10.50.0.0/24 10.50.0.16/28] [10.50.0.0/24 10.50.0.240/28]]"},
		{"families apart", ps("fd00::/120", "10.0.0.0/24", "fd00::40/122", "10.0.0.0/26"),
			"[[10.0.0.0/24 10.0.0.0/26] [fd00::/120 fd00::40/122]]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(OverlappingBlocks(tc.blocks)); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
