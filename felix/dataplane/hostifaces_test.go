package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseIPAddr(t *testing.T) {
	out := `1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
1: lo    inet6 ::1/128 scope host \       valid_lft forever preferred_lft forever
4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\       valid_lft forever preferred_lft forever
4: eth0    inet6 fd00::2/64 scope global nodad \       valid_lft forever preferred_lft forever
7: veth1@if6    inet 10.0.0.1/32 scope global veth1\       valid_lft forever preferred_lft forever
garbage line
`
	got := parseIPAddr([]byte(out))
	want := map[string][]netip.Addr{
		"lo":    {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"eth0":  {netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("fd00::2")},
		"veth1": {netip.MustParseAddr("10.0.0.1")},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
