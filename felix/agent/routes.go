package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/felix/wireguard"
)

// newRouteManager returns the route manager of the namespace felix
// programs (TABBY_FELIX_NETNS, or its own), with its WireGuard drivers
// (onKey hears their public keys), and the function closing its netlink
// handle and WireGuard sockets.
func newRouteManager(cfg config, log *slog.Logger, reg prometheus.Registerer, onKey func(v6 bool, k wgtypes.Key)) (*routes.Manager, func(), error) {
	h, err := netlink.NewHandle()
	if cfg.netnsPath != "" {
		var nsh netns.NsHandle
		if nsh, err = netns.GetFromPath(cfg.netnsPath); err != nil {
			return nil, nil, fmt.Errorf("opening %s: %w", cfg.netnsPath, err)
		}
		defer nsh.Close()
		h, err = netlink.NewHandleAt(nsh)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("netlink handle for the route manager: %w", err)
	}
	drv := routes.NewDriver(h, log)
	drv.MTUFile = cfg.mtuFile
	drv.IPIPMTU, drv.VXLANMTU, drv.VXLANMTUV6 = cfg.ipipMTU, cfg.vxlanMTU, cfg.vxlanMTUv6
	if cfg.mtuIfacePattern != "" {
		drv.MTUIfacePattern = regexp.MustCompile(cfg.mtuIfacePattern) // parsed by felix/config
	}
	drv.Sysctl = func(key, value string) error {
		write := func() error { return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644) }
		if cfg.netnsPath == "" {
			return write()
		}
		return ns.WithNetNSPath(cfg.netnsPath, func(ns.NetNS) error { return write() })
	}
	drv.ReadSysctl = func(key string) (string, error) {
		var b []byte
		read := func() (err error) { b, err = os.ReadFile(filepath.Join("/proc/sys", key)); return err }
		var err error
		if cfg.netnsPath == "" {
			err = read()
		} else {
			err = ns.WithNetNSPath(cfg.netnsPath, func(ns.NetNS) error { return read() })
		}
		return string(b), err
	}
	opener := &wgClientOpener{netnsPath: cfg.netnsPath}
	for i := range drv.Wireguard {
		if i == 1 && !cfg.ipv6 {
			continue
		}
		drv.Wireguard[i] = wireguard.NewDriver(h, opener.New, cfg.hostname, log)
		drv.Wireguard[i].Sysctl = drv.Sysctl
	}
	drv.OnWireguardKey = onKey
	rm := routes.NewManager(routes.ManagerConfig{NodeName: cfg.hostname, RefreshInterval: cfg.routeRefresh, Driver: drv, Logger: log,
		Metrics: routes.NewMetrics(reg), Wireguard: cfg.wireguard})
	return rm, func() { opener.Close(); h.Close() }, nil
}

// endpointStatus is r as the daemon's reporter, nil (no interface
// holding a nil pointer) when the status files are off.
func endpointStatus(r *epstatus.Reporter) daemon.EndpointStatusReporter {
	if r == nil {
		return nil
	}
	return r
}

// cleanupOtherBackend removes felix's rules from the iptables backend
// felix does not use (see dataplane.CleanupBackend); failures are logged,
// felix goes on.
func cleanupOtherBackend(ctx context.Context, run dataplane.Runner, inUse dataplane.Backend, log *slog.Logger) {
	for _, b := range dataplane.OtherBackends(inUse) {
		chains, rules, err := dataplane.CleanupBackend(ctx, run, b)
		if err != nil {
			log.Error("cleaning felix's rules from the other iptables backend", "backend", b.Restore, "error", err)
			continue
		}
		if chains+rules > 0 {
			log.Info("removed felix's rules from the other iptables backend", "backend", b.Restore, "chains", chains, "rules", rules)
		}
	}
}
