package routes

import (
	"regexp"
)

// DefaultMTUIfacePattern is Calico's MTUIfacePattern: the host
// interfaces whose MTU bounds the pods' (physical NICs by their usual
// names).
var DefaultMTUIfacePattern = regexp.MustCompile(`^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)`)

// PodMTU is the MTU pods should use: the smallest MTU of the host
// interfaces matching pattern, minus the largest overhead of the
// encapsulations d uses. ok is false when no interface matches.
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
	return mtu - overhead, true
}
