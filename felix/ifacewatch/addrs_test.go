package ifacewatch

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAddrs: addresses grouped by interface name, sorted and unique,
// IPv4 as IPv4 (netlink gives 16-byte forms too), interfaces without
// addresses listed empty, addresses of unknown indexes left out.
func TestAddrs(t *testing.T) {
	got := Addrs([]Link{{1, "lo"}, {2, "eth0"}, {3, "eth1"}}, []Addr{
		{2, net.ParseIP("10.0.0.2")}, // 16-byte form
		{2, net.ParseIP("fd00::2")},
		{2, net.IPv4(10, 0, 0, 1).To4()},
		{2, net.ParseIP("10.0.0.2")},
		{1, net.ParseIP("127.0.0.1")},
		{9, net.ParseIP("192.168.0.1")}, // its link went between the dumps
	})
	want := map[string][]netip.Addr{
		"lo":   {netip.MustParseAddr("127.0.0.1")},
		"eth0": {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::2")},
		"eth1": {},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("Addrs (-want +got):\n%s", diff)
	}
}
