package routes

import (
	"regexp"

	"github.com/tabbynet/tabby/felix/wireguard"
)

// DefaultMTUIfacePattern is Calico's MTUIfacePattern: the host
// interfaces whose MTU bounds the pods' (physical NICs by their usual
// names).
var DefaultMTUIfacePattern = regexp.MustCompile(`^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)`)

// PodMTU is the MTU pods should use: the smallest MTU of the host
// interfaces matching pattern, minus the largest overhead of the
// encapsulations d uses (WireGuard included). ok is false when no interface matches.
func PodMTU(ifaceMTUs map[string]int, pattern *regexp.Regexp, d Desired) (mtu int, ok bool) {
	for name, m := range ifaceMTUs {
		if pattern.MatchString(name) && m > 0 && (!ok || m < mtu) {
			mtu, ok = m, true
		}
	}
	if !ok {
		return 0, false
	}
	overhead := 0
	if d.IPIP.IsValid() {
		overhead = max(overhead, IPIPOverhead)
	}
	if d.VXLAN != nil {
		overhead = max(overhead, VXLANOverhead)
	}
	if d.VXLANv6 != nil {
		overhead = max(overhead, VXLANOverheadV6)
	}
	// Pod traffic to WireGuard peers leaves through the WireGuard device,
	// not the tunnels: its overhead counts too (Calico's MTU file is the
	// smallest MTU of the encapsulations enabled).
	if d.Wireguard[0].Config.Enabled {
		overhead = max(overhead, wireguard.Overhead)
	}
	if d.Wireguard[1].Config.Enabled {
		overhead = max(overhead, wireguard.OverheadV6)
	}
	return mtu - overhead, true
}
