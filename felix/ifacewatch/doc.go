// Package ifacewatch watches a network namespace's interface addresses
// through a netlink subscription and reports the whole set (interface
// name -> addresses) after every change, bursts coalesced, as an input to
// felix's calculation (daemon.Daemon.OnHostInterfaces): the calculation
// turn never reads the kernel itself.
//
// It is an edge: the netlink code is in watch_linux.go; Addrs, the
// reduction of netlink's answers to the map reported, is pure.
package ifacewatch

import (
	"net"
	"net/netip"
	"slices"
)

// Link is an interface's index and name; Addr an address on an
// interface (by index), as netlink lists them.
type (
	Link struct {
		Index int
		Name  string
	}
	Addr struct {
		LinkIndex int
		IP        net.IP
	}
)

// Addrs is the map reported: each named interface's addresses, sorted
// (an interface without addresses has an empty list; addresses of an
// index no link has are left out: the link went between the two dumps,
// the next report has it right).
func Addrs(links []Link, addrs []Addr) map[string][]netip.Addr {
	names := make(map[int]string, len(links))
	out := make(map[string][]netip.Addr, len(links))
	for _, l := range links {
		names[l.Index] = l.Name
		out[l.Name] = []netip.Addr{}
	}
	for _, a := range addrs {
		name, ok := names[a.LinkIndex]
		ip, ok2 := netip.AddrFromSlice(a.IP)
		if !ok || !ok2 {
			continue
		}
		out[name] = append(out[name], ip.Unmap())
	}
	for name, as := range out {
		slices.SortFunc(as, netip.Addr.Compare)
		out[name] = slices.Compact(as)
	}
	return out
}
