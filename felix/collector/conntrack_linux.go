package collector

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Conntrack dumps the conntrack table of one network namespace.
type Conntrack struct {
	h *netlink.Handle
}

// OpenConntrack opens a netlink handle in the namespace at netnsPath (""
// for felix's own) and turns on conntrack's byte and packet accounting
// there (nf_conntrack_acct, off by default; Calico turns it on for flow
// logs too). Connections that started before it was on count nothing.
func OpenConntrack(netnsPath string) (*Conntrack, error) {
	nsh := netns.None()
	if netnsPath != "" {
		var err error
		if nsh, err = netns.GetFromPath(netnsPath); err != nil {
			return nil, fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
		}
		defer nsh.Close()
	}
	if err := enableAccounting(netnsPath); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, fmt.Errorf("opening a conntrack handle: %w", err)
	}
	return &Conntrack{h: h}, nil
}

const acctSysctl = "/proc/sys/net/netfilter/nf_conntrack_acct"

// enableAccounting sets nf_conntrack_acct in the namespace (the file is
// per network namespace: it is written from a thread inside it).
func enableAccounting(netnsPath string) error {
	write := func(ns.NetNS) error {
		if err := os.WriteFile(acctSysctl, []byte("1"), 0); err != nil {
			return fmt.Errorf("turning on conntrack accounting (%s): %w", acctSysctl, err)
		}
		return nil
	}
	if netnsPath == "" {
		return write(nil)
	}
	n, err := ns.GetNS(netnsPath)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
	}
	defer n.Close()
	return n.Do(write)
}

// Close closes the handle.
func (c *Conntrack) Close() { c.h.Close() }

// Dump lists the IPv4 and IPv6 connections, each under its original
// tuple and, when NAT changed the destination or source, also under the
// tuple the filter table saw (after DNAT).
func (c *Conntrack) Dump() (map[Tuple]Conn, error) {
	out := map[Tuple]Conn{}
	for _, fam := range []netlink.InetFamily{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		flows, err := c.h.ConntrackTableList(netlink.ConntrackTable, fam)
		if err != nil {
			return nil, fmt.Errorf("listing conntrack: %w", err)
		}
		for _, f := range flows {
			orig := Tuple{Src: addr(f.Forward.SrcIP), Dst: addr(f.Forward.DstIP), Proto: f.Forward.Protocol,
				SrcPort: f.Forward.SrcPort, DstPort: f.Forward.DstPort}
			e := Conn{Tuple: orig, Packets: f.Forward.Packets + f.Reverse.Packets, Bytes: f.Forward.Bytes + f.Reverse.Bytes}
			out[orig] = e
			// After DNAT the packet went to the reply's source.
			dnat := Tuple{Src: orig.Src, Dst: addr(f.Reverse.SrcIP), Proto: orig.Proto, SrcPort: orig.SrcPort, DstPort: f.Reverse.SrcPort}
			if dnat != orig {
				out[dnat] = e
			}
		}
	}
	return out, nil
}

func addr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
