package ifacewatch

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Config configures Watch.
type Config struct {
	// NetnsPath is the namespace watched ("" is the caller's own).
	NetnsPath string
	// Report is given the whole set after each change (never modified
	// afterwards); it must not block for long.
	Report func(map[string][]netip.Addr)
	// Coalesce is how long a burst of changes is gathered before the
	// addresses are read again [default 20ms]; Resync how often they are
	// read anyway, in case netlink dropped a notification [default 60s].
	Coalesce, Resync time.Duration
	Logger           *slog.Logger
}

// Watch reports the namespace's interface addresses once at start and
// again whenever they change, until ctx ends. A failed subscription or
// read is logged and retried (with backoff up to 10s); only a namespace
// that cannot be opened at all is an error.
func Watch(ctx context.Context, cfg Config) error {
	if cfg.Coalesce == 0 {
		cfg.Coalesce = 20 * time.Millisecond
	}
	if cfg.Resync == 0 {
		cfg.Resync = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	nsh := netns.None()
	if cfg.NetnsPath != "" {
		var err error
		if nsh, err = netns.GetFromPath(cfg.NetnsPath); err != nil {
			return fmt.Errorf("opening %s: %w", cfg.NetnsPath, err)
		}
		defer nsh.Close()
	}
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return fmt.Errorf("netlink handle for the address watcher: %w", err)
	}
	defer h.Close()
	w := &watcher{cfg: cfg, nsh: nsh, h: h}
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if err := w.run(ctx); err != nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
			cfg.Logger.Warn("interface address watch failed; retrying", "error", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
	}
	return nil
}

type watcher struct {
	cfg  Config
	nsh  netns.NsHandle
	h    *netlink.Handle
	last map[string][]netip.Addr
}

// run subscribes, reports, and reports again after each change until
// ctx ends (nil) or the subscription fails.
func (w *watcher) run(ctx context.Context) error {
	done := make(chan struct{})
	addrs := make(chan netlink.AddrUpdate, 64)
	links := make(chan netlink.LinkUpdate, 64)
	var subscribed []func()
	defer func() {
		close(done)
		// The library's receivers send without watching done: drain the
		// subscribed ones until they close their channels, so that none
		// stays blocked.
		for _, drain := range subscribed {
			go drain()
		}
	}()
	failed := make(chan error, 2)
	onErr := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	ns := w.nsh
	if err := netlink.AddrSubscribeWithOptions(addrs, done, netlink.AddrSubscribeOptions{Namespace: nsPtr(ns), ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("subscribing to addresses: %w", err)
	}
	subscribed = append(subscribed, func() {
		for range addrs {
		}
	})
	if err := netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{Namespace: nsPtr(ns), ErrorCallback: onErr}); err != nil {
		return fmt.Errorf("subscribing to links: %w", err)
	}
	subscribed = append(subscribed, func() {
		for range links {
		}
	})
	// Subscribed first, read second: no change falls between the two.
	if err := w.read(); err != nil {
		return err
	}
	resync := time.NewTicker(w.cfg.Resync)
	defer resync.Stop()
	var coalesce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case _, ok := <-addrs:
			if !ok {
				return fmt.Errorf("address subscription closed")
			}
		case _, ok := <-links:
			if !ok {
				return fmt.Errorf("link subscription closed")
			}
		case <-resync.C:
		case <-coalesce:
			coalesce = nil
			if err := w.read(); err != nil {
				return err
			}
			continue
		}
		if coalesce == nil {
			coalesce = time.After(w.cfg.Coalesce)
		}
	}
}

func nsPtr(h netns.NsHandle) *netns.NsHandle {
	if h == netns.None() {
		return nil
	}
	return &h
}

// read lists the links and addresses and reports them when they changed.
func (w *watcher) read() error {
	ls, err := w.h.LinkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	as, err := w.h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("listing addresses: %w", err)
	}
	links := make([]Link, 0, len(ls))
	for _, l := range ls {
		links = append(links, Link{Index: l.Attrs().Index, Name: l.Attrs().Name})
	}
	addrs := make([]Addr, 0, len(as))
	for _, a := range as {
		addrs = append(addrs, Addr{LinkIndex: a.LinkIndex, IP: a.IP})
	}
	m := Addrs(links, addrs)
	if w.last != nil && maps.EqualFunc(m, w.last, slices.Equal) {
		return nil
	}
	w.last = m
	w.cfg.Report(m)
	return nil
}

// Read returns the interface addresses of the namespace at netnsPath
// ("" is the caller's own) once, as Watch reports them.
func Read(netnsPath string) (map[string][]netip.Addr, error) {
	nsh := netns.None()
	if netnsPath != "" {
		var err error
		if nsh, err = netns.GetFromPath(netnsPath); err != nil {
			return nil, fmt.Errorf("opening %s: %w", netnsPath, err)
		}
		defer nsh.Close()
	}
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	var m map[string][]netip.Addr
	w := &watcher{h: h, cfg: Config{Report: func(r map[string][]netip.Addr) { m = r }}}
	if err := w.read(); err != nil {
		return nil, err
	}
	return m, nil
}
