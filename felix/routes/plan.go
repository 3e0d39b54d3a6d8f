package routes

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/felix/infra"
)

// The driver's plans: what one sync changes, decided from the kernel's
// state as read (and the driver's memory) without touching the kernel.
// They are pure; driver_linux.go reads, plans and applies.

// routeKey identifies a route for the diff.
type routeKey struct {
	dst    netip.Prefix
	gw     netip.Addr
	dev    string
	onlink bool
}

// ownership says which kernel routes (of felix's protocol) are the route
// manager's.
type ownership struct {
	// workloadPrefixes name the CNI's interfaces.
	workloadPrefixes []string
	// pools are the pool CIDRs seen since start.
	pools map[netip.Prefix]bool
}

func (o ownership) isWorkloadDev(dev string) bool {
	return slices.ContainsFunc(o.workloadPrefixes, func(p string) bool { return strings.HasPrefix(dev, p) })
}

// owns says whether a kernel route (already of felix's protocol) is the
// manager's: through a tunnel device, or via a gateway into a pool it has
// seen, and never on a workload interface.
func (o ownership) owns(k routeKey) bool {
	if o.isWorkloadDev(k.dev) {
		return false
	}
	if k.dev == VXLANDevice || k.dev == VXLANDeviceV6 || k.dev == IPIPDevice {
		return true
	}
	if !k.gw.IsValid() {
		return false
	}
	for p := range o.pools {
		if p.Contains(k.dst.Addr()) && p.Bits() <= k.dst.Bits() {
			return true
		}
	}
	return false
}

// routePlan is what one sync of one IP version's routes changes.
type routePlan struct {
	// del are indexes into the kernel's routes to remove; delWorkload
	// says which of them are unexplained workload routes past their grace
	// (logged at Info).
	del         []int
	delWorkload []bool
	// add are the routes to add (or replace), sorted by destination.
	add []Route
	// unknownSince is the new memory of unexplained workload routes of
	// this IP version (when each was first seen).
	unknownSince map[routeKey]time.Time
}

// planRoutes diffs the kernel's routes of felix's protocol (have) with
// the wanted routes of the same IP version: a route felix owns and does
// not want goes, a wanted route missing is added; a route on a workload
// interface that no endpoint explains goes only once it has been
// unexplained for grace (the CNI writes the route before felix hears of
// the endpoint). unknownSince is the memory of the last sync (not
// modified).
func planRoutes(have []routeKey, want []Route, o ownership, unknownSince map[routeKey]time.Time, now time.Time, grace time.Duration) routePlan {
	wantKeys := map[routeKey]Route{}
	wantDst := map[netip.Prefix]routeKey{}
	for _, r := range want {
		k := routeKey{dst: r.Dst, gw: r.Gw, dev: r.Dev, onlink: r.OnLink}
		wantKeys[k] = r
		wantDst[r.Dst] = k
	}
	p := routePlan{unknownSince: map[routeKey]time.Time{}}
	for i, k := range have {
		if o.isWorkloadDev(k.dev) {
			if k.gw.IsValid() || k.onlink {
				continue // not the shape of a workload route: not ours
			}
			if _, ok := wantKeys[k]; ok {
				delete(wantKeys, k)
				continue
			}
			since, ok := unknownSince[k]
			if !ok || now.Sub(since) < grace {
				if !ok {
					since = now // first seen: kept at least until the next sync
				}
				p.unknownSince[k] = since
				continue
			}
			p.del, p.delWorkload = append(p.del, i), append(p.delWorkload, true)
			continue
		}
		if !o.owns(k) {
			continue
		}
		// A wanted direct route (no device) matches the kernel's whatever
		// interface the kernel chose.
		if w, ok := wantDst[k.dst]; ok && (w == k || (w.dev == "" && w.gw == k.gw && w.onlink == k.onlink)) {
			delete(wantKeys, w)
			continue
		}
		p.del, p.delWorkload = append(p.del, i), append(p.delWorkload, false)
	}
	for _, r := range wantKeys {
		p.add = append(p.add, r)
	}
	slices.SortFunc(p.add, func(a, b Route) int { return infra.ComparePrefix(a.Dst, b.Dst) })
	return p
}

// neighEntry is a neighbour (ARP/NDP) or FDB entry as read from the
// kernel: the address and MAC, and whether it is permanent.
type neighEntry struct {
	ip        netip.Addr
	mac       string
	permanent bool
}

// neighPlan is what one sync of a device's entries changes: indexes
// into the kernel's entries to remove, entries to add.
type neighPlan struct {
	del []int
	add []neighEntry
}

// planNeighbors diffs a VXLAN device's ARP/NDP entries (remote VTEP
// address -> MAC) with the wanted ones: a wanted entry present with
// another MAC or not permanent is replaced; any other permanent entry
// goes (the kernel's own, learnt ones are left alone).
func planNeighbors(have []neighEntry, want map[netip.Addr]string) neighPlan {
	want = maps.Clone(want)
	var p neighPlan
	for i, n := range have {
		mac, wanted := want[n.ip]
		if wanted && mac == n.mac && n.permanent {
			delete(want, n.ip)
			continue
		}
		if wanted || n.permanent {
			p.del = append(p.del, i)
		}
	}
	for ip, mac := range want {
		p.add = append(p.add, neighEntry{ip: ip, mac: mac, permanent: true})
	}
	slices.SortFunc(p.add, func(a, b neighEntry) int { return a.ip.Compare(b.ip) })
	return p
}

// planFDB diffs a VXLAN device's FDB (remote VTEP MAC -> remote node
// address; entries with a zero MAC are the kernel's and not given) with
// the wanted entries: a permanent entry not wanted (or pointing
// elsewhere) goes, learnt ones age out on their own.
func planFDB(have []neighEntry, want map[string]netip.Addr) neighPlan {
	wantLeft := make(map[string]netip.Addr, len(want))
	for mac, dst := range want {
		wantLeft[mac] = dst
	}
	var p neighPlan
	for i, f := range have {
		if w, ok := wantLeft[f.mac]; ok && w == f.ip {
			delete(wantLeft, f.mac)
			continue
		}
		if f.permanent {
			p.del = append(p.del, i)
		}
	}
	for mac, dst := range wantLeft {
		p.add = append(p.add, neighEntry{ip: dst, mac: mac, permanent: true})
	}
	slices.SortFunc(p.add, func(a, b neighEntry) int { return strings.Compare(a.mac, b.mac) })
	return p
}
