package wireguard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// ErrUnsupported: the kernel cannot create a WireGuard device. The
// WireGuard table is then programmed in its fail-closed form (see
// FailClosed): nothing that should be encrypted leaves in clear.
var ErrUnsupported = errors.New("the kernel has no WireGuard (creating a wireguard device is not supported); traffic to other nodes' pods is dropped rather than sent unencrypted")

// Client is what the driver needs of wgctrl.Client (bound to the
// namespace it programs).
type Client interface {
	Device(name string) (*wgtypes.Device, error)
	ConfigureDevice(name string, cfg wgtypes.Config) error
}

// Driver reconciles one IP version's Desired with the kernel: the device,
// its peers (through wgctrl), its address, the WireGuard routing table
// and its rule. The private key lives only in the device (as Calico's
// felix: it survives felix restarts, and a new device gets a new key).
// Not safe for concurrent use (the route manager calls it from one
// goroutine).
type Driver struct {
	h   *netlink.Handle
	log *slog.Logger
	// NewClient opens the wgctrl client, once the device exists.
	NewClient func() (Client, error)
	client    Client
	// ThisNode is this node's name (FailClosed keeps its routes).
	ThisNode string
	// Sysctl writes a sysctl of the namespace (src_valid_mark).
	Sysctl func(key, value string) error
}

// NewDriver returns a driver over h.
func NewDriver(h *netlink.Handle, newClient func() (Client, error), thisNode string, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	return &Driver{h: h, log: log, NewClient: newClient, ThisNode: thisNode}
}

// Apply makes the kernel match d; hostMTU is the underlay's MTU (the
// device's is hostMTU minus the overhead unless configured). It returns
// the device's public key (zero when disabled or unsupported). With the
// kernel unable to create the device it programs the fail-closed table
// and returns ErrUnsupported.
func (dr *Driver) Apply(d Desired, hostMTU int) (wgtypes.Key, error) {
	c := d.Config
	if !c.Enabled {
		return wgtypes.Key{}, dr.remove(c)
	}
	link, err := dr.ensureLink(c, deviceMTU(c, hostMTU))
	if errors.Is(err, ErrUnsupported) {
		if rerr := dr.syncTableAndRule(FailClosed(d, dr.ThisNode).Routes, c, 0); rerr != nil {
			return wgtypes.Key{}, errors.Join(err, rerr)
		}
		return wgtypes.Key{}, fmt.Errorf("%s: %w", c.InterfaceName, err)
	}
	if err != nil {
		return wgtypes.Key{}, err
	}
	pub, err := dr.syncPeers(d)
	if err != nil {
		return pub, err
	}
	if err := dr.syncAddr(link, d.Addr); err != nil {
		return pub, err
	}
	if !c.V6 && dr.Sysctl != nil {
		// As Calico: the rp_filter check must see the fwmark.
		if err := dr.Sysctl("net/ipv4/conf/all/src_valid_mark", "1"); err != nil {
			return pub, fmt.Errorf("setting src_valid_mark: %w", err)
		}
	}
	return pub, dr.syncTableAndRule(d.Routes, c, link.Attrs().Index)
}

// deviceMTU is the configured MTU, or the host's less the overhead.
func deviceMTU(c Config, hostMTU int) int {
	switch {
	case c.MTU > 0:
		return c.MTU
	case hostMTU <= 0:
		return 0 // the kernel's default
	case c.V6:
		return hostMTU - OverheadV6
	}
	return hostMTU - Overhead
}

// ensureLink creates the device (or fixes its MTU) and brings it up.
func (dr *Driver) ensureLink(c Config, mtu int) (netlink.Link, error) {
	link, err := dr.h.LinkByName(c.InterfaceName)
	if err != nil && !isNotFound(err) {
		return nil, fmt.Errorf("looking up %s: %w", c.InterfaceName, err)
	}
	if err == nil && link.Type() != "wireguard" {
		return nil, fmt.Errorf("%s exists and is a %s device, not wireguard: remove it", c.InterfaceName, link.Type())
	}
	if link == nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU = c.InterfaceName, mtu
		if err := dr.h.LinkAdd(&netlink.Wireguard{LinkAttrs: attrs}); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, syscall.ENOTSUP) {
				return nil, ErrUnsupported
			}
			return nil, fmt.Errorf("creating %s: %w", c.InterfaceName, err)
		}
		dr.log.Info("created the WireGuard device", "device", c.InterfaceName, "mtu", mtu)
		if link, err = dr.h.LinkByName(c.InterfaceName); err != nil {
			return nil, fmt.Errorf("looking up %s: %w", c.InterfaceName, err)
		}
	}
	if mtu > 0 && link.Attrs().MTU != mtu {
		if err := dr.h.LinkSetMTU(link, mtu); err != nil {
			return nil, fmt.Errorf("setting %s's MTU to %d: %w", c.InterfaceName, mtu, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := dr.h.LinkSetUp(link); err != nil {
			return nil, fmt.Errorf("bringing %s up: %w", c.InterfaceName, err)
		}
	}
	return link, nil
}

// syncPeers applies PlanPeers, generating the private key the device
// lacks, and returns the device's public key.
func (dr *Driver) syncPeers(d Desired) (wgtypes.Key, error) {
	name := d.Config.InterfaceName
	if dr.client == nil {
		c, err := dr.NewClient()
		if err != nil {
			return wgtypes.Key{}, fmt.Errorf("opening the WireGuard control socket: %w", err)
		}
		dr.client = c
	}
	dev, err := dr.client.Device(name)
	if err != nil {
		return wgtypes.Key{}, fmt.Errorf("reading %s: %w", name, err)
	}
	p := PlanPeers(d, dev)
	pub := dev.PublicKey
	if p.NeedKey {
		k, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			return wgtypes.Key{}, fmt.Errorf("generating a WireGuard key: %w", err)
		}
		p.Config.PrivateKey = &k
		pub = k.PublicKey()
	}
	if p.Empty() {
		return pub, nil
	}
	if err := dr.client.ConfigureDevice(name, p.Config); err != nil {
		return wgtypes.Key{}, fmt.Errorf("configuring %s: %w", name, err)
	}
	dr.log.Info("WireGuard peers programmed", "device", name, "added", p.Added, "updated", p.Updated,
		"removed", p.Removed, "newKey", p.NeedKey, "peers", len(d.Peers))
	return pub, nil
}

// syncAddr gives the device exactly addr (none when invalid).
func (dr *Driver) syncAddr(link netlink.Link, addr netip.Addr) error {
	fam := unix.AF_INET
	if addr.Is6() {
		fam = unix.AF_INET6
	}
	have, err := dr.h.AddrList(link, fam)
	if err != nil {
		return fmt.Errorf("listing %s's addresses: %w", link.Attrs().Name, err)
	}
	found := false
	for _, a := range have {
		ip, _ := netip.AddrFromSlice(a.IP)
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		if ip.Unmap() == addr {
			found = true
			continue
		}
		if err := dr.h.AddrDel(link, &a); err != nil {
			return fmt.Errorf("removing %s from %s: %w", a.IPNet, link.Attrs().Name, err)
		}
	}
	if found || !addr.IsValid() {
		return nil
	}
	n := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
	if err := dr.h.AddrAdd(link, &netlink.Addr{IPNet: n}); err != nil {
		return fmt.Errorf("adding %s to %s: %w", addr, link.Attrs().Name, err)
	}
	return nil
}

// remove takes away the device, the table's routes and the rule.
func (dr *Driver) remove(c Config) error {
	var errs []error
	if link, err := dr.h.LinkByName(c.InterfaceName); err == nil && link.Type() == "wireguard" {
		dr.log.Info("removing the WireGuard device", "device", c.InterfaceName)
		if err := dr.h.LinkDel(link); err != nil {
			errs = append(errs, fmt.Errorf("removing %s: %w", c.InterfaceName, err))
		}
	}
	dr.client = nil
	errs = append(errs, dr.syncTableAndRule(nil, c, 0))
	return errors.Join(errs...)
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}
