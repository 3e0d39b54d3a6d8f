package dataplane

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
)

func TestParseIPSetMember(t *testing.T) {
	ok := []struct {
		typ    calc.IPSetType
		family string
		m      string
		want   ipsetMember
	}{
		{calc.HashNet, "inet", "10.1.2.3", ipsetMember{addr: netip.MustParseAddr("10.1.2.3"), bits: 32}},
		{calc.HashNet, "inet", "10.1.2.3/32", ipsetMember{addr: netip.MustParseAddr("10.1.2.3"), bits: 32}},
		{calc.HashNet, "inet", "10.1.0.0/16", ipsetMember{addr: netip.MustParseAddr("10.1.0.0"), bits: 16}},
		{calc.HashNet, "inet6", "fd00::1", ipsetMember{addr: netip.MustParseAddr("fd00::1"), bits: 128}},
		{calc.HashNet, "inet6", "fd00:1::/64", ipsetMember{addr: netip.MustParseAddr("fd00:1::"), bits: 64}},
		{calc.HashIPPort, "inet", "10.1.2.3,tcp:8080", ipsetMember{addr: netip.MustParseAddr("10.1.2.3"), proto: 6, port: 8080}},
		{calc.HashIPPort, "inet", "10.1.2.3,udp:53", ipsetMember{addr: netip.MustParseAddr("10.1.2.3"), proto: 17, port: 53}},
		{calc.HashIPPort, "inet", "10.1.2.3,sctp:9", ipsetMember{addr: netip.MustParseAddr("10.1.2.3"), proto: 132, port: 9}},
		{calc.HashIPPort, "inet", "10.1.2.3,udplite:0", ipsetMember{addr: netip.MustParseAddr("10.1.2.3"), proto: 136, port: 0}},
		{calc.HashIPPort, "inet6", "fd00::1,tcp:65535", ipsetMember{addr: netip.MustParseAddr("fd00::1"), proto: 6, port: 65535}},
	}
	for _, tc := range ok {
		got, err := parseIPSetMember(tc.typ, tc.family, tc.m)
		if err != nil || got != tc.want {
			t.Errorf("%s %s %q: got %+v, %v; want %+v", tc.typ, tc.family, tc.m, got, err, tc.want)
		}
		if n := testing.AllocsPerRun(10, func() { _, _ = parseIPSetMember(tc.typ, tc.family, tc.m) }); n != 0 {
			t.Errorf("%q: %v allocations, want none", tc.m, n)
		}
	}
	bad := []struct {
		typ    calc.IPSetType
		family string
		m      string
	}{
		{calc.HashNet, "inet", "0.0.0.0/0"}, // the kernel would read a missing prefix length
		{calc.HashNet, "inet", "10.0.0.0/33"},
		{calc.HashNet, "inet", "10.0.0.0/x"},
		{calc.HashNet, "inet", "fd00::1"},
		{calc.HashNet, "inet6", "10.0.0.1"},
		{calc.HashNet, "inet6", "::ffff:10.0.0.1"},
		{calc.HashNet, "inet6", "fe80::1%eth0"},
		{calc.HashNet, "inet6", "fd00::/129"},
		{calc.HashNet, "inet", "10.0.0.1-10.0.0.9"},
		{calc.HashNet, "inet", "10.0.0.1,tcp:80"},
		{calc.HashIPPort, "inet", "10.0.0.1"},
		{calc.HashIPPort, "inet", "10.0.0.1,80"},
		{calc.HashIPPort, "inet", "10.0.0.1,icmp:ping"},
		{calc.HashIPPort, "inet", "10.0.0.1,tcp:http"},
		{calc.HashIPPort, "inet", "10.0.0.1,tcp:65536"},
		{calc.HashIPPort, "inet", "10.0.0.1,tcp:80-90"},
		{calc.HashIPPort, "inet", "10.0.0.0/24,tcp:80"},
		{calc.HashIPPort, "inet6", "10.0.0.1,tcp:80"},
		{"hash:ip", "inet", "10.0.0.1"},
	}
	for _, tc := range bad {
		if got, err := parseIPSetMember(tc.typ, tc.family, tc.m); !errors.Is(err, ErrMembersUnsupported) {
			t.Errorf("%s %s %q: got %+v, %v; want ErrMembersUnsupported", tc.typ, tc.family, tc.m, got, err)
		}
	}
}
