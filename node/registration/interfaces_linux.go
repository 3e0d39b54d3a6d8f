package registration

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// dumpRetries bounds how often NetlinkEnv reads again after the kernel
// interrupted a dump (NLM_F_DUMP_INTR: an interface or address changed
// while it was read, so the answer may be incomplete), as when the CNI
// plugin wires pods while calico-node starts.
const dumpRetries = 50

// NetlinkEnv lists the interfaces and answers route lookups through h
// (bound to the node's network namespace).
func NetlinkEnv(h *netlink.Handle) (Env, error) {
	for i := 0; ; i++ {
		env, err := netlinkEnv(h)
		if errors.Is(err, netlink.ErrDumpInterrupted) && i < dumpRetries {
			continue
		}
		return env, err
	}
}

func netlinkEnv(h *netlink.Handle) (Env, error) {
	links, err := h.LinkList()
	if err != nil {
		return Env{}, fmt.Errorf("listing interfaces: %w", err)
	}
	env := Env{RouteSource: func(dst netip.Addr) (netip.Addr, error) {
		rs, err := h.RouteGet(net.IP(dst.AsSlice()))
		if err != nil {
			return netip.Addr{}, err
		}
		for _, r := range rs {
			if a, ok := netip.AddrFromSlice(r.Src); ok {
				return a.Unmap(), nil
			}
		}
		return netip.Addr{}, fmt.Errorf("the route to %s has no source address", dst)
	}}
	for _, l := range links {
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return Env{}, fmt.Errorf("listing %s's addresses: %w", l.Attrs().Name, err)
		}
		ifc := Interface{Name: l.Attrs().Name}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			bits, _ := a.Mask.Size()
			ifc.Addrs = append(ifc.Addrs, netip.PrefixFrom(ip.Unmap(), bits))
		}
		env.Interfaces = append(env.Interfaces, ifc)
	}
	return env, nil
}
