package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// HostInterfaces lists the interfaces of the namespace the runner works
// in and their addresses (`ip -o addr show`), for resolving host
// endpoints given by their expected IPs only.
func HostInterfaces(ctx context.Context, run Runner) (map[string][]netip.Addr, error) {
	out, err := run.Run(ctx, "ip", []string{"-o", "addr", "show"}, nil)
	if err != nil {
		return nil, fmt.Errorf("listing interface addresses: %w", err)
	}
	return parseIPAddr(out), nil
}

// HostInterfaces lists the dataplane's namespace's interfaces and
// addresses (see the package-level HostInterfaces).
func (d *Dataplane) HostInterfaces(ctx context.Context) (map[string][]netip.Addr, error) {
	return HostInterfaces(ctx, d.cfg.Runner)
}

// parseIPAddr parses `ip -o addr show` lines:
// "4: eth0    inet 192.0.2.2/24 brd ... scope global eth0\ ...".
func parseIPAddr(out []byte) map[string][]netip.Addr {
	ifaces := map[string][]netip.Addr{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || (f[2] != "inet" && f[2] != "inet6") {
			continue
		}
		name, _, _ := strings.Cut(f[1], "@")
		p, err := netip.ParsePrefix(f[3])
		if err != nil {
			continue
		}
		ifaces[name] = append(ifaces[name], p.Addr())
	}
	return ifaces
}
