package calc_test

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// TestComputeFocusedAgreesWithCompute checks the narrowed calculation
// against the whole one on the scenario: for every local endpoint and a
// few flow addresses, the endpoint's tier lists, its policies' rules and
// profiles are Compute's, and each set holds exactly Compute's members
// that hold one of the addresses.
func TestComputeFocusedAgreesWithCompute(t *testing.T) {
	in := ct.Input(ct.Node, ct.Scenario())
	full := calc.Compute(in)
	addrSets := [][]netip.Addr{
		{netip.MustParseAddr("10.65.0.3"), netip.MustParseAddr("10.65.0.1")},
		{netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("10.65.0.2")},
		{netip.MustParseAddr("203.0.113.5"), netip.MustParseAddr("10.65.1.1")},
		{netip.MustParseAddr("2001:db8::1")},
	}
	if len(full.Endpoints) < 3 {
		t.Fatalf("scenario has %d local endpoints", len(full.Endpoints))
	}
	for _, want := range full.Endpoints {
		for _, addrs := range addrSets {
			ref := calc.EndpointRef{Kind: want.Kind, Key: want.Key}
			got := calc.ComputeFocused(in, calc.Focus{Endpoints: []calc.EndpointRef{ref}, Addrs: addrs})
			ep := findEndpoint(got, ref)
			if ep == nil {
				t.Fatalf("%s: not in the focused result", want.Key)
			}
			if !reflect.DeepEqual(*ep, want) {
				t.Errorf("%s: endpoint\n%+v\nwant\n%+v", want.Key, *ep, want)
			}
			for id, p := range got.Policies {
				if !reflect.DeepEqual(p, full.Policies[id]) {
					t.Errorf("%s: policy %s differs", want.Key, id)
				}
			}
			for id, set := range got.IPSets {
				checkFocusedSet(t, want.Key, set, full.IPSets[id], addrs)
			}
		}
	}
}

func findEndpoint(res *calc.Result, ref calc.EndpointRef) *calc.Endpoint {
	for i := range res.Endpoints {
		if res.Endpoints[i].Kind == ref.Kind && res.Endpoints[i].Key == ref.Key {
			return &res.Endpoints[i]
		}
	}
	return nil
}

// checkFocusedSet: every focused member is one of Compute's, and every
// member of Compute's that holds an address is in the focused set.
func checkFocusedSet(t *testing.T, key string, got, want *calc.IPSet, addrs []netip.Addr) {
	t.Helper()
	if want == nil {
		t.Errorf("%s: set %s not in Compute's result", key, got.ID)
		return
	}
	for m := range got.Members.All() {
		if !want.Members.Has(m) {
			t.Errorf("%s: set %s: member %s not Compute's", key, got.ID, m)
		}
	}
	for m := range want.Members.All() {
		if holdsAny(m, addrs) && !got.Members.Has(m) {
			t.Errorf("%s: set %s: member %s holds a flow address but is missing", key, got.ID, m)
		}
	}
}

func holdsAny(member string, addrs []netip.Addr) bool {
	ip, _, _ := strings.Cut(member, ",")
	p, err := netip.ParsePrefix(ip)
	if err != nil {
		a, aerr := netip.ParseAddr(ip)
		if aerr != nil {
			return false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	for _, a := range addrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// TestNarrowKeepsServices: a narrowed input still follows Services with
// every EndpointSlice, so a services match selects as in Compute.
func TestNarrowKeepsServices(t *testing.T) {
	slice := ct.EndpointSlice("prod", "api-x1", "api", []string{"10.0.1.5"}, ct.SlicePort{Proto: "TCP", Port: 8080})
	in := calc.Input{FollowsServices: true, EndpointSlices: []*v3.KubernetesEndpointSlice{slice}}
	got := calc.Focus{Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}.Narrow(in)
	if !got.FollowsServices || len(got.EndpointSlices) != 1 || got.EndpointSlices[0] != slice {
		t.Errorf("narrowed: follows %v, slices %v; want the input's", got.FollowsServices, got.EndpointSlices)
	}
}
