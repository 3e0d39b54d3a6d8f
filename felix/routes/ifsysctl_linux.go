package routes

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// Per-interface settings of local workload interfaces.
//
// As Calico's felix (endpoint manager, configureInterface) does for each
// workload interface that is up, whatever the CNI set: IPv6 router
// advertisements off (always, for safety), and per IP version the
// workload has:
//
//	IPv4: route_localnet=1, neigh proxy_delay=0, proxy_arp=1,
//	      forwarding=1, rp_filter=<the namespace's default rp_filter>
//	IPv6: proxy_ndp=1, forwarding=1
//
// An interface is configured once per Apply in which it first appears
// (and again after it went from the desired routes and came back); an
// interface not there yet (the sysctl directory is missing) is retried at
// the next Apply. Errors other than a missing interface are returned.

// workloadSysctls are the settings for interface dev, given the
// namespace's default rp_filter.
func workloadSysctls(dev string, v4, v6 bool, rpFilter string) [][2]string {
	out := [][2]string{{"net/ipv6/conf/" + dev + "/accept_ra", "0"}}
	if v4 {
		out = append(out,
			[2]string{"net/ipv4/conf/" + dev + "/route_localnet", "1"},
			[2]string{"net/ipv4/neigh/" + dev + "/proxy_delay", "0"},
			[2]string{"net/ipv4/conf/" + dev + "/proxy_arp", "1"},
			[2]string{"net/ipv4/conf/" + dev + "/forwarding", "1"},
			[2]string{"net/ipv4/conf/" + dev + "/rp_filter", rpFilter})
	}
	if v6 {
		out = append(out,
			[2]string{"net/ipv6/conf/" + dev + "/proxy_ndp", "1"},
			[2]string{"net/ipv6/conf/" + dev + "/forwarding", "1"})
	}
	return out
}

// syncInterfaceSysctls configures the workload interfaces of d's local
// routes not configured yet.
func (dr *Driver) syncInterfaceSysctls(d Desired) error {
	if dr.Sysctl == nil {
		return nil
	}
	want := map[string]ipFamilies{}
	for _, r := range d.Routes {
		if !r.Workload || r.Dev == "" {
			continue
		}
		f := want[r.Dev]
		if r.Dst.Addr().Is4() {
			f.v4 = true
		} else {
			f.v6 = true
		}
		want[r.Dev] = f
	}
	if dr.sysctlDone == nil {
		dr.sysctlDone = map[string]ipFamilies{}
	}
	for dev := range dr.sysctlDone {
		if _, ok := want[dev]; !ok {
			delete(dr.sysctlDone, dev)
		}
	}
	rpFilter := "1" // Calico's fallback when the default cannot be read
	if dr.ReadSysctl != nil {
		if v, err := dr.ReadSysctl("net/ipv4/conf/default/rp_filter"); err == nil && strings.TrimSpace(v) != "" {
			rpFilter = strings.TrimSpace(v)
		}
	}
	var errs []error
	for dev, f := range want {
		if done, ok := dr.sysctlDone[dev]; ok && done == f {
			continue
		}
		var missing bool
		for _, kv := range workloadSysctls(dev, f.v4, f.v6, rpFilter) {
			err := dr.Sysctl(kv[0], kv[1])
			if errors.Is(err, fs.ErrNotExist) {
				// The interface is not there (yet), or IPv6 is off in the
				// namespace (accept_ra): the rest still applies.
				if !strings.HasPrefix(kv[0], "net/ipv6/conf/"+dev+"/accept_ra") {
					missing = true
				}
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("setting %s=%s on workload interface %s: %w", kv[0], kv[1], dev, err))
				missing = true
			}
		}
		if !missing {
			dr.sysctlDone[dev] = f
		}
	}
	return errors.Join(errs...)
}

// ipFamilies are the IP versions an interface has workload routes of.
type ipFamilies struct{ v4, v6 bool }
