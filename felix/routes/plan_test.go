package routes

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var planCmp = []cmp.Option{cmp.AllowUnexported(routeKey{}, routePlan{}, neighEntry{}, neighPlan{}),
	cmp.Comparer(func(x, y netip.Addr) bool { return x == y }), cmp.Comparer(func(x, y netip.Prefix) bool { return x == y })}

// TestPlanRoutes: the route plan alone, on the kernel's routes as read:
// owned and unwanted routes go, foreign ones stay, a wanted direct route
// matches whatever interface the kernel chose, missing routes are added
// in order; an unexplained workload route is remembered on first sight,
// kept within its grace and removed after it; a workload-shaped route
// with a gateway is never touched.
func TestPlanRoutes(t *testing.T) {
	own := ownership{workloadPrefixes: []string{"cali"}, pools: map[netip.Prefix]bool{pfx("10.70.0.0/16"): true}}
	have := []routeKey{
		{dst: pfx("10.70.1.0/26"), gw: a("10.70.1.1"), dev: VXLANDevice, onlink: true}, // 0 wanted
		{dst: pfx("10.70.2.0/26"), gw: a("10.70.2.1"), dev: VXLANDevice, onlink: true}, // 1 not wanted: goes
		{dst: pfx("10.70.3.0/26"), gw: a("172.30.1.13"), dev: "eth0"},                  // 2 wanted direct: matches
		{dst: pfx("192.168.0.0/24"), gw: a("172.30.1.1"), dev: "eth0"},                 // 3 foreign (no pool): stays
		{dst: pfx("10.70.0.5/32"), dev: "cali1"},                                       // 4 explained workload route
		{dst: pfx("10.70.0.9/32"), dev: "cali2"},                                       // 5 unexplained, first seen
		{dst: pfx("10.70.0.8/32"), dev: "cali3"},                                       // 6 unexplained, past grace
		{dst: pfx("10.70.0.7/32"), gw: a("10.70.0.1"), dev: "cali4"},                   // 7 not a workload route's shape
		{dst: pfx("10.70.0.6/32"), dev: "cali5"},                                       // 8 unexplained, within grace
	}
	want := []Route{
		{Dst: pfx("10.70.4.0/26"), Gw: a("10.70.4.1"), Dev: VXLANDevice, OnLink: true},
		{Dst: pfx("10.70.1.0/26"), Gw: a("10.70.1.1"), Dev: VXLANDevice, OnLink: true},
		{Dst: pfx("10.70.3.0/26"), Gw: a("172.30.1.13")},
		{Dst: pfx("10.70.0.5/32"), Dev: "cali1", Workload: true},
		{Dst: pfx("10.70.0.4/32"), Dev: "cali6", Workload: true},
	}
	now := time.Unix(1000, 0)
	unknown := map[routeKey]time.Time{have[6]: now.Add(-31 * time.Second), have[8]: now.Add(-10 * time.Second),
		{dst: pfx("10.70.0.3/32"), dev: "cali7"}: now.Add(-time.Hour)} // gone from the kernel: forgotten
	got := planRoutes(have, want, own, unknown, now, 30*time.Second)
	exp := routePlan{
		del: []int{1, 6}, delWorkload: []bool{false, true},
		add:          []Route{want[4], want[0]},
		unknownSince: map[routeKey]time.Time{have[5]: now, have[8]: now.Add(-10 * time.Second)},
	}
	if diff := cmp.Diff(exp, got, planCmp...); diff != "" {
		t.Errorf("planRoutes (-want +got):\n%s", diff)
	}
	if len(unknown) != 3 {
		t.Error("planRoutes modified the memory it was given")
	}
}

// TestPlanNeighbors: ARP/NDP entries: a wanted permanent entry stays, a
// wrong MAC or a non-permanent entry for a wanted address is replaced,
// an unwanted permanent entry goes, a learnt one stays; FDB: the same by
// MAC, learnt entries age out on their own.
func TestPlanNeighbors(t *testing.T) {
	have := []neighEntry{
		{ip: a("10.70.1.1"), mac: macB, permanent: true},  // wanted
		{ip: a("10.70.2.1"), mac: macA, permanent: true},  // wrong MAC
		{ip: a("10.70.3.1"), mac: macC, permanent: false}, // wanted but not permanent
		{ip: a("10.70.9.1"), mac: macC, permanent: true},  // unwanted
		{ip: a("10.70.8.1"), mac: macC, permanent: false}, // learnt
	}
	want := map[netip.Addr]string{a("10.70.1.1"): macB, a("10.70.2.1"): macC, a("10.70.3.1"): macC, a("10.70.4.1"): macA}
	got := planNeighbors(have, want)
	exp := neighPlan{del: []int{1, 2, 3}, add: []neighEntry{
		{ip: a("10.70.2.1"), mac: macC, permanent: true}, {ip: a("10.70.3.1"), mac: macC, permanent: true},
		{ip: a("10.70.4.1"), mac: macA, permanent: true}}}
	if diff := cmp.Diff(exp, got, planCmp...); diff != "" {
		t.Errorf("planNeighbors (-want +got):\n%s", diff)
	}
	if len(want) != 4 {
		t.Error("planNeighbors modified what it was given")
	}
	fdb := []neighEntry{
		{ip: a("172.30.1.11"), mac: macB, permanent: true},  // wanted
		{ip: a("172.30.1.99"), mac: macC, permanent: true},  // points elsewhere
		{ip: a("172.30.1.50"), mac: macA, permanent: false}, // learnt
		{}, // the kernel's own (zero MAC)
	}
	gotFDB := planFDB(fdb, map[string]netip.Addr{macB: a("172.30.1.11"), macC: a("172.30.2.12")})
	expFDB := neighPlan{del: []int{1}, add: []neighEntry{{ip: a("172.30.2.12"), mac: macC, permanent: true}}}
	if diff := cmp.Diff(expFDB, gotFDB, planCmp...); diff != "" {
		t.Errorf("planFDB (-want +got):\n%s", diff)
	}
}
