package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

func netnsPath(name string) string { return filepath.Join(harness.NetnsDir, name) }

// handle is an open named namespace with a netlink handle bound to it.
type handle struct {
	name string
	ns.NetNS
	NL *netlink.Handle
}

func (h *handle) Close() {
	h.NL.Close()
	_ = h.NetNS.Close()
}

// createNetns creates /run/netns/<name> with lo up. Every link the lab
// makes is created through such handles: the root namespace is never
// changed.
func createNetns(name string) (*handle, error) {
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("creating netns %s: %w: %s", name, err, out)
	}
	h, err := openNetns(name)
	if err != nil {
		return nil, err
	}
	lo, err := h.NL.LinkByName("lo")
	if err == nil {
		err = h.NL.LinkSetUp(lo)
	}
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("lo up in %s: %w", name, err)
	}
	return h, nil
}

func openNetns(name string) (*handle, error) {
	n, err := ns.GetNS(netnsPath(name))
	if err != nil {
		return nil, fmt.Errorf("opening netns %s: %w", name, err)
	}
	nl, err := netlink.NewHandleAt(netns.NsHandle(int(n.Fd())))
	if err != nil {
		_ = n.Close()
		return nil, fmt.Errorf("netlink handle in %s: %w", name, err)
	}
	return &handle{name: name, NetNS: n, NL: nl}, nil
}

// sysctl writes /proc/sys/<key> inside the namespace.
func (h *handle) sysctl(key, value string) error {
	return h.Do(func(ns.NetNS) error {
		p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
		if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, h.name, err)
		}
		return nil
	})
}

// veth links a's an to b's bn, both up.
func veth(a *handle, an string, b *handle, bn string) error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: an}, PeerName: bn, PeerNamespace: netlink.NsFd(int(b.Fd()))}
	if err := a.NL.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s/%s - %s/%s: %w", a.name, an, b.name, bn, err)
	}
	for _, e := range []struct {
		h    *handle
		name string
	}{{a, an}, {b, bn}} {
		l, err := e.h.NL.LinkByName(e.name)
		if err != nil {
			return err
		}
		if err := e.h.NL.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}

func addrUp(h *handle, link string, p netip.Prefix) error {
	l, err := h.NL.LinkByName(link)
	if err != nil {
		return fmt.Errorf("finding %s in %s: %w", link, h.name, err)
	}
	a, err := netlink.ParseAddr(p.String())
	if err != nil {
		return err
	}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := h.NL.AddrAdd(l, a); err != nil {
		return fmt.Errorf("adding %s to %s in %s: %w", p, link, h.name, err)
	}
	return h.NL.LinkSetUp(l)
}

// deleteNetns kills what still runs inside the namespace and removes it.
func deleteNetns(name string) error {
	out, _ := exec.Command("ip", "netns", "pids", name).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		var p int
		if _, err := fmt.Sscan(f, &p); err == nil && p != os.Getpid() {
			pids = append(pids, p)
		}
	}
	if err := harness.KillAll(pids, 0); err != nil {
		return err
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		if _, serr := os.Stat(netnsPath(name)); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing netns %s: %w: %s", name, err, out)
	}
	return nil
}

func newBridge(name string) *netlink.Bridge {
	return &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
}

func defaultRoute(h *handle, gw netip.Addr) error {
	if err := h.NL.RouteAdd(&netlink.Route{Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("default route via %s in %s: %w", gw, h.name, err)
	}
	return nil
}
