package ipam

import (
	"net/netip"
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
