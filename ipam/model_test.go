package ipam

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// TestModel runs random sequences of allocate / release / specific assign
// / empty-block release / node removal on several nodes (two allocators on
// one of them, as two CNI processes would be) against the fake store, and
// after every step compares the store with a reference model (a map from
// address to handle) and checks every invariant: block accounting, no
// duplicates, handles match allocations, one owner per block, reserved
// addresses never handed out, and exhaustion reported exactly when the
// model says there is no room.
func TestModel(t *testing.T) {
	for seed := range modelSeeds(16) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runModel(t, seed, seed%2 == 1, 250) })
	}
}

func runModel(t *testing.T, seed uint64, strict bool, steps int) {
	rng := rand.New(rand.NewPCG(seed, 42))
	ctx := context.Background()
	poolCIDR := netip.MustParsePrefix("10.0.0.0/26")
	const blockBits = 29
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", poolCIDR.String(), blockBits), ipamConfig(strict), reservation("r", "10.0.0.3/32", "10.0.0.40/30"))
	reserved := Reservations{netip.MustParsePrefix("10.0.0.3/32"), netip.MustParsePrefix("10.0.0.40/30")}
	nodes := []string{"n0", "n1", "n2"}
	// Half read through the Store's one-revision ReadMany, half through
	// separate reads (the fallback of backends without it).
	allocs := []*Allocator{New(s, Config{}), New(singleReads{s}, Config{}), New(s, Config{}), New(singleReads{s}, Config{})}
	allocFor := func(i int) *Allocator { return allocs[i] } // allocs[3] is a second process on n0
	nodeOf := func(i int) string { return nodes[i%3] }

	model := map[netip.Addr]string{}
	handles := map[string][]netip.Addr{}
	next := 0
	check := func(step int, what string) {
		t.Helper()
		snap := checkStore(t, s)
		if t.Failed() {
			t.Fatalf("step %d (%s): invariants broken", step, what)
		}
		if fmt.Sprint(snap.byIP) != fmt.Sprint(model) {
			t.Fatalf("step %d (%s): store %v, model %v", step, what, snap.byIP, model)
		}
		for ip := range snap.byIP {
			if reserved.Contains(ip) {
				t.Fatalf("step %d: reserved %s allocated", step, ip)
			}
		}
	}
	// room says how many addresses node could get now.
	room := func(node string) int {
		snap := checkStore(t, s)
		n := 0
		for b := range NumBlocks(poolCIDR, blockBits) {
			cidr := NthBlock(poolCIDR, blockBits, b)
			blk := snap.blocks[cidr]
			switch {
			case blk == nil:
				n += freeIn(cidr, model, reserved)
			case !strict || (blk.Spec.Affinity != nil && *blk.Spec.Affinity == AffinityValue(node)):
				n += freeIn(cidr, model, reserved)
			}
		}
		return n
	}
	for step := range steps {
		ai := rng.IntN(4)
		a, node := allocFor(ai), nodeOf(ai)
		switch op := rng.IntN(10); {
		case op < 4: // auto-assign
			n := 1 + rng.IntN(3)
			h := fmt.Sprintf("h%d", next)
			next++
			want := room(node)
			ips, err := a.AutoAssign(ctx, podArgs(node, h, n, 0))
			if err != nil {
				if !errors.Is(err, ErrPoolExhausted) || want >= n {
					t.Fatalf("step %d: assign %d on %s: %v (model room %d)", step, n, node, err, want)
				}
				check(step, "failed assign")
				continue
			}
			if want < n {
				t.Fatalf("step %d: got %v but model room was %d", step, ips, want)
			}
			for _, ip := range ips {
				if _, dup := model[ip]; dup {
					t.Fatalf("step %d: %s handed out twice", step, ip)
				}
				model[ip] = "k8s-pod-network." + h
			}
			handles["k8s-pod-network."+h] = ips
			check(step, "assign")
		case op < 6: // release by handle
			if len(handles) == 0 {
				continue
			}
			hs := sortedKeys(handles)
			h := hs[rng.IntN(len(hs))]
			got, err := a.ReleaseByHandle(ctx, h)
			if err != nil {
				t.Fatalf("step %d: release %s: %v", step, h, err)
			}
			slices.SortFunc(got, netip.Addr.Compare)
			want := slices.SortedFunc(slices.Values(handles[h]), netip.Addr.Compare)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: release %s freed %v, want %v", step, h, got, want)
			}
			for _, ip := range want {
				delete(model, ip)
			}
			delete(handles, h)
			check(step, "release handle")
		case op < 7: // release one address
			if len(model) == 0 {
				continue
			}
			ips := slices.SortedFunc(func(yield func(netip.Addr) bool) {
				for ip := range model {
					if !yield(ip) {
						return
					}
				}
			}, netip.Addr.Compare)
			ip := ips[rng.IntN(len(ips))]
			if _, err := a.ReleaseIPs(ctx, ip); err != nil {
				t.Fatalf("step %d: release %s: %v", step, ip, err)
			}
			h := model[ip]
			delete(model, ip)
			handles[h] = slices.DeleteFunc(handles[h], func(x netip.Addr) bool { return x == ip })
			if len(handles[h]) == 0 {
				delete(handles, h)
			}
			check(step, "release ip")
		case op < 8: // specific address
			ip := OrdinalToIP(poolCIDR, rng.IntN(64))
			h := fmt.Sprintf("h%d", next)
			next++
			err := a.AssignIP(ctx, AssignIPArgs{IP: ip, HandleID: "k8s-pod-network." + h, Hostname: node})
			_, taken := model[ip]
			switch {
			case reserved.Contains(ip):
				if !errors.Is(err, ErrReserved) {
					t.Fatalf("step %d: reserved %s: %v", step, ip, err)
				}
			case taken:
				if !errors.Is(err, ErrInUse) {
					t.Fatalf("step %d: taken %s: %v", step, ip, err)
				}
			case err != nil:
				t.Fatalf("step %d: assign %s: %v", step, ip, err)
			default:
				model[ip] = "k8s-pod-network." + h
				handles["k8s-pod-network."+h] = []netip.Addr{ip}
			}
			check(step, "assign ip")
		case op < 9: // empty block release, seen twice
			for range 2 {
				if _, err := a.ReleaseEmptyBlocks(ctx, node, 0); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
			}
			check(step, "release empty blocks")
		default: // the node goes away and comes back fresh
			if rng.IntN(3) != 0 {
				continue
			}
			if _, err := a.ReleaseNodeBlocks(ctx, node); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			check(step, "release node blocks")
		}
	}
}

// modelSeeds is how many seeds the model tests run: def, or
// TABBY_IPAM_MODEL_SEEDS for a longer soak.
func modelSeeds(def uint64) uint64 {
	if v := os.Getenv("TABBY_IPAM_MODEL_SEEDS"); v != "" {
		var n uint64
		fmt.Sscan(v, &n)
		return n
	}
	return def
}

func freeIn(cidr netip.Prefix, model map[netip.Addr]string, reserved Reservations) int {
	n := 0
	for o := range BlockSizeOf(cidr) {
		ip := OrdinalToIP(cidr, o)
		if _, used := model[ip]; !used && !reserved.Contains(ip) {
			n++
		}
	}
	return n
}

func sortedKeys(m map[string][]netip.Addr) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
