package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// nodeStartingAt returns a node name whose first choice of block in pool
// (NextBlock with nothing taken) is want, so a test can make two nodes aim
// at overlapping blocks.
func nodeStartingAt(t testing.TB, prefix string, pool netip.Prefix, blockBits int, want netip.Prefix) string {
	t.Helper()
	for i := range 100000 {
		n := fmt.Sprintf("%s-%d", prefix, i)
		if b, _ := NextBlock(pool, blockBits, n, nil); b == want {
			return n
		}
	}
	t.Fatalf("no node name starts at %s in %s", want, pool)
	return ""
}

// overlapPools are the pools: 10.50.0.0/20 with /24 blocks and
// 10.50.0.0/24 with /28 blocks, written bypassing the pool overlap check
// (the fake store runs only per-object validation, as a raw write does).
func overlapPools() (big, small netip.Prefix) {
	return netip.MustParsePrefix("10.50.0.0/20"), netip.MustParsePrefix("10.50.0.0/24")
}

// TestOverlappingPoolsNoDuplicateAddress: one node allocates from each of
// two overlapping pools of different block sizes, each aiming at the block
// that starts at 10.50.0.0. Whichever claims first, the second never claims
// a block overlapping the first, so no address is handed out twice.
func TestOverlappingPoolsNoDuplicateAddress(t *testing.T) {
	big, small := overlapPools()
	nodeBig := nodeStartingAt(t, "big", big, 24, netip.MustParsePrefix("10.50.0.0/24"))
	nodeSmall := nodeStartingAt(t, "small", small, 28, netip.MustParsePrefix("10.50.0.0/28"))
	for _, bigFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("bigFirst=%v", bigFirst), func(t *testing.T) {
			s, a := newFake(t, pool("big", big.String(), 24), pool("small", small.String(), 28))
			fromBig := func() []netip.Addr {
				args := podArgs(nodeBig, "a", 1, 0)
				args.IPv4Pools = []string{"big"}
				return mustAssign(t, a, args)
			}
			fromSmall := func() []netip.Addr {
				args := podArgs(nodeSmall, "b", 1, 0)
				args.IPv4Pools = []string{"small"}
				return mustAssign(t, a, args)
			}
			var ipBig, ipSmall []netip.Addr
			if bigFirst {
				ipBig, ipSmall = fromBig(), fromSmall()
			} else {
				ipSmall, ipBig = fromSmall(), fromBig()
			}
			if ipBig[0] == ipSmall[0] {
				t.Errorf("both nodes got %s", ipBig[0])
			}
			checkStore(t, s)
		})
	}
}

// TestOverlappingPoolsManyNodes: several nodes take addresses from two
// overlapping pools in turn (the first two aiming at 10.50.0.0); every
// address handed out is unique.
func TestOverlappingPoolsManyNodes(t *testing.T) {
	big, small := overlapPools()
	s, a := newFake(t, pool("big", big.String(), 24), pool("small", small.String(), 28))
	nodes := []string{
		nodeStartingAt(t, "big", big, 24, netip.MustParsePrefix("10.50.0.0/24")),
		nodeStartingAt(t, "small", small, 28, netip.MustParsePrefix("10.50.0.0/28")),
		"n2", "n3", "n4", "n5",
	}
	ctx := context.Background()
	seen := map[netip.Addr]string{}
	for i := range 240 {
		node := nodes[i%len(nodes)] // even i: big, odd: small
		args := podArgs(node, fmt.Sprintf("p%d", i), 1, 0)
		args.IPv4Pools = []string{[]string{"big", "small"}[i%2]}
		ips, err := a.AutoAssign(ctx, args)
		if err != nil {
			t.Fatalf("AutoAssign %d: %v", i, err)
		}
		if h, dup := seen[ips[0]]; dup {
			t.Fatalf("%s handed out to %s and %s", ips[0], h, args.HandleID)
		}
		seen[ips[0]] = args.HandleID
	}
	checkStore(t, s)
}

// claimHooks wraps a node's client to pause its block claim at chosen
// points: before[e] runs before and after[e] after the node's event e,
// where e is "list1", "list2", ... (its lists of blocks), "create1", ...
// (its block creates), "update1", ... (its block updates: allocations),
// "confirm1", ... (its affinity updates) or "delete1", ... (its block
// deletes).
type claimHooks struct {
	datastore.Client
	mu            sync.Mutex
	count         map[string]int
	before, after map[string]func()
	events        []string // in order, for a failure's message
}

func newHooks(c datastore.Client) *claimHooks {
	return &claimHooks{Client: c, count: map[string]int{}, before: map[string]func(){}, after: map[string]func(){}}
}

// around runs op between the hooks of the next event of its kind.
func (h *claimHooks) around(kind string, op func()) {
	h.mu.Lock()
	h.count[kind]++
	e := fmt.Sprintf("%s%d", kind, h.count[kind])
	h.events = append(h.events, e)
	before, after := h.before[e], h.after[e]
	h.mu.Unlock()
	if before != nil {
		before()
	}
	op()
	if after != nil {
		after()
	}
}

func (h *claimHooks) List(ctx context.Context, kind string, opts datastore.ListOptions) (l *datastore.List, err error) {
	if kind != v3.KindIPAMBlock {
		return h.Client.List(ctx, kind, opts)
	}
	h.around("list", func() { l, err = h.Client.List(ctx, kind, opts) })
	return l, err
}

func (h *claimHooks) Create(ctx context.Context, r v3.Resource) (out v3.Resource, err error) {
	if v3.KindOf(r) != v3.KindIPAMBlock {
		return h.Client.Create(ctx, r)
	}
	h.around("create", func() { out, err = h.Client.Create(ctx, r) })
	return out, err
}

func (h *claimHooks) Update(ctx context.Context, r v3.Resource) (out v3.Resource, err error) {
	switch v3.KindOf(r) {
	case v3.KindIPAMBlock:
		h.around("update", func() { out, err = h.Client.Update(ctx, r) })
	case v3.KindBlockAffinity:
		h.around("confirm", func() { out, err = h.Client.Update(ctx, r) })
	default:
		out, err = h.Client.Update(ctx, r)
	}
	return out, err
}

func (h *claimHooks) Delete(ctx context.Context, k datastore.Key, opts datastore.DeleteOptions) (out v3.Resource, err error) {
	if k.Kind != v3.KindIPAMBlock {
		return h.Client.Delete(ctx, k, opts)
	}
	h.around("delete", func() { out, err = h.Client.Delete(ctx, k, opts) })
	return out, err
}

// step is a one-shot event between two goroutines: wait blocks until done
// has been called (failing the test rather than hanging if it never is).
func step(t *testing.T, name string) (wait, done func()) {
	ch := make(chan struct{})
	var once sync.Once
	return func() {
			select {
			case <-ch:
			case <-time.After(20 * time.Second):
				t.Errorf("step %q never happened", name)
			}
		}, func() {
			once.Do(func() { close(ch) })
		}
}

// TestOverlappingClaimsRace: two nodes pick overlapping blocks of
// different sizes (10.50.0.0/24 from pool big, 10.50.0.0/28 from pool
// small) from the same snapshot, so the check before the claim cannot
// help. Each ordering of the creates and the checks after them is forced:
// the later-created block always yields, both yield when both are created
// before either check, no two stored blocks overlap, and both nodes get an
// address (a yielding node claims elsewhere, or borrows).
func TestOverlappingClaimsRace(t *testing.T) {
	big, small := overlapPools()
	bigBlock, smallBlock := netip.MustParsePrefix("10.50.0.0/24"), netip.MustParsePrefix("10.50.0.0/28")
	nodeBig := nodeStartingAt(t, "big", big, 24, bigBlock)
	nodeSmall := nodeStartingAt(t, "small", small, 28, smallBlock)
	for _, tc := range []struct {
		name                       string
		wire                       func(t *testing.T, bigH, smallH *claimHooks)
		wantBigKept, wantSmallKept bool
	}{
		{
			// Both blocks exist before either check: both see the other
			// and both claims are undone.
			name: "both created before either check",
			wire: func(t *testing.T, bigH, smallH *claimHooks) {
				waitSmallListed, smallListed := step(t, "smallListed")
				waitBigCreated, bigCreated := step(t, "bigCreated")
				waitSmallCreated, smallCreated := step(t, "smallCreated")
				waitBigUndone, bigUndone := step(t, "bigUndone")
				smallH.after["list1"] = smallListed
				bigH.before["create1"] = waitSmallListed
				bigH.after["create1"] = bigCreated
				smallH.before["create1"] = waitBigCreated
				smallH.after["create1"] = smallCreated
				bigH.before["list2"] = waitSmallCreated
				// Each check (a node's second list of blocks) runs before
				// the other node undoes anything.
				waitBigChecked, bigChecked := step(t, "bigChecked")
				bigH.after["list2"] = bigChecked
				smallH.before["list2"] = waitBigChecked
				waitSmallChecked, smallChecked := step(t, "smallChecked")
				smallH.after["list2"] = smallChecked
				bigH.before["delete1"] = waitSmallChecked
				// The small node looks again only once the big claim is
				// undone, so what it finds is not left to timing.
				bigH.after["delete1"] = bigUndone
				smallH.before["list3"] = waitBigUndone
			},
		},
		{
			// The big block is created and checked before the small one is
			// created: only the later, small, claim is undone.
			name: "the later create yields",
			wire: func(t *testing.T, bigH, smallH *claimHooks) {
				waitSmallListed, smallListed := step(t, "smallListed")
				waitBigChecked, bigChecked := step(t, "bigChecked")
				smallH.after["list1"] = smallListed
				bigH.before["create1"] = waitSmallListed
				bigH.after["list2"] = bigChecked
				smallH.before["create1"] = waitBigChecked
			},
			wantBigKept: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ipamtest.NewStore()
			mustCreate(t, s, pool("big", big.String(), 24), pool("small", small.String(), 28))
			bigH, smallH := newHooks(s), newHooks(s)
			tc.wire(t, bigH, smallH)
			ctx := context.Background()
			var wg sync.WaitGroup
			var mu sync.Mutex
			got := map[string]netip.Addr{}
			for _, n := range []struct {
				node, pool string
				c          datastore.Client
			}{{nodeBig, "big", bigH}, {nodeSmall, "small", smallH}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					args := podArgs(n.node, n.pool, 1, 0)
					args.IPv4Pools = []string{n.pool}
					ips, err := New(n.c, Config{}).AutoAssign(ctx, args)
					if err != nil {
						t.Errorf("%s: %v", n.node, err)
						return
					}
					mu.Lock()
					got[n.pool] = ips[0]
					mu.Unlock()
				}()
			}
			wg.Wait()
			snap := checkStore(t, s)
			var cidrs []netip.Prefix
			for c := range snap.blocks {
				cidrs = append(cidrs, c)
			}
			if o := OverlappingBlocks(cidrs); len(o) > 0 {
				t.Fatalf("overlapping blocks stored: %v", o)
			}
			_, bigKept := snap.blocks[bigBlock]
			_, smallKept := snap.blocks[smallBlock]
			if bigKept != tc.wantBigKept || smallKept != tc.wantSmallKept {
				t.Errorf("first claims kept: big %v small %v, want big %v small %v (blocks %v)", bigKept, smallKept, tc.wantBigKept, tc.wantSmallKept, cidrs)
			}
			if len(got) != 2 || got["big"] == got["small"] {
				t.Errorf("addresses %v", got)
			}
		})
	}
}

// TestOverlapCheckAfterConfirmKeepsClaim: two processes of one node claim
// the same block; the first checks it (no overlap) and confirms it; then a
// block of an overlapping pool appears, and the second process's check
// sees it. The confirmed claim stands (the newer block yields), the second
// process allocates from it too, and the newer block is undone.
func TestOverlapCheckAfterConfirmKeepsClaim(t *testing.T) {
	big, small := overlapPools()
	bigBlock := netip.MustParsePrefix("10.50.0.0/24")
	nodeBig := nodeStartingAt(t, "big", big, 24, bigBlock)
	nodeSmall := nodeStartingAt(t, "small", small, 28, netip.MustParsePrefix("10.50.0.0/28"))
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("big", big.String(), 24), pool("small", small.String(), 28))
	p1, p2, p3 := newHooks(s), newHooks(s), newHooks(s)
	t.Cleanup(func() {
		if t.Failed() {
			for i, h := range []*claimHooks{p1, p2, p3} {
				h.mu.Lock()
				t.Logf("p%d: %v", i+1, h.events)
				h.mu.Unlock()
			}
		}
	})
	waitP2Listed, p2Listed := step(t, "p2Listed")
	waitP3Listed, p3Listed := step(t, "p3Listed")
	waitP1Checked, p1Checked := step(t, "p1Checked")
	waitP3Created, p3Created := step(t, "p3Created")
	p2.after["list1"] = p2Listed
	p3.after["list1"] = p3Listed
	// p1 creates its block only once p2 is at its own create: p2's looks
	// at the node's affinities before it (not hooked) then cannot find
	// p1's block, confirmed (p2 would take it without claiming) or
	// pending (p2 would finish p1's claim as an interrupted one). Under
	// -race both happened, and p2Checked never came.
	waitP2Creating, p2Creating := step(t, "p2Creating")
	p1.before["create1"] = func() { waitP2Listed(); waitP3Listed(); waitP2Creating() }
	p1.after["list2"] = p1Checked
	p2.before["create1"] = func() { p2Creating(); waitP1Checked() } // its create finds p1's block
	waitP1Confirmed, p1Confirmed := step(t, "p1Confirmed")
	p1.after["confirm1"] = p1Confirmed
	p3.before["create1"] = waitP1Confirmed
	p3.after["create1"] = p3Created
	p2.before["list2"] = waitP3Created // its check sees p3's block...
	waitP2Checked, p2Checked := step(t, "p2Checked")
	p2.after["list2"] = p2Checked
	p3.before["delete1"] = waitP2Checked // ...still there
	// p1 allocates only once p2 is done, so p2's check meets an empty
	// block: only the confirmed affinity says the claim stands.
	waitP2Done, p2Done := step(t, "p2Done")
	p1.before["update1"] = waitP2Done
	ctx := context.Background()
	var wg sync.WaitGroup
	got := make([]netip.Addr, 3)
	for i, n := range []struct {
		node, pool string
		c          datastore.Client
	}{{nodeBig, "big", p1}, {nodeBig, "big", p2}, {nodeSmall, "small", p3}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := podArgs(n.node, fmt.Sprintf("pod%d", i), 1, 0)
			args.IPv4Pools = []string{n.pool}
			ips, err := New(n.c, Config{}).AutoAssign(ctx, args)
			if i == 1 {
				p2Done()
			}
			if err != nil {
				t.Errorf("process %d: %v", i+1, err)
				return
			}
			got[i] = ips[0]
		}()
	}
	wg.Wait()
	snap := checkStore(t, s)
	if _, ok := snap.blocks[bigBlock]; !ok {
		t.Fatalf("the confirmed block was undone: blocks %v", snap.blocks)
	}
	for i := range 2 {
		if !bigBlock.Contains(got[i]) {
			t.Errorf("process %d got %s, not from %s", i+1, got[i], bigBlock)
		}
	}
	var cidrs []netip.Prefix
	for c := range snap.blocks {
		cidrs = append(cidrs, c)
	}
	if o := OverlappingBlocks(cidrs); len(o) > 0 {
		t.Fatalf("overlapping blocks stored: %v", o)
	}
}

// TestAssignIPWithOverlappingPools: a specific address is taken from the
// block that already holds its range, whichever pool's block size that
// is, never from a second, overlapping block; an address in use there is
// refused; an address in two (pre-existing) overlapping blocks is refused.
func TestAssignIPWithOverlappingPools(t *testing.T) {
	big, small := overlapPools()
	nodeSmall := nodeStartingAt(t, "small", small, 28, netip.MustParsePrefix("10.50.0.0/28"))
	s, a := newFake(t, pool("big", big.String(), 24), pool("small", small.String(), 28))
	ctx := context.Background()
	args := podArgs(nodeSmall, "first", 1, 0)
	args.IPv4Pools = []string{"small"}
	if ips := mustAssign(t, a, args); ips[0] != netip.MustParseAddr("10.50.0.0") {
		t.Fatalf("first address %s", ips[0])
	}
	// 10.50.0.0 lies in pool big too (PoolFor picks big, /24 blocks).
	err := a.AssignIP(ctx, AssignIPArgs{IP: netip.MustParseAddr("10.50.0.0"), HandleID: "h-dup", Hostname: "other"})
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("AssignIP of an address held in the /28: %v", err)
	}
	if err := a.AssignIP(ctx, AssignIPArgs{IP: netip.MustParseAddr("10.50.0.7"), HandleID: "h-7", Hostname: "other"}); err != nil {
		t.Fatal(err)
	}
	snap := checkStore(t, s)
	if _, ok := snap.blocks[netip.MustParsePrefix("10.50.0.0/24")]; ok {
		t.Fatalf("AssignIP claimed a /24 over the existing /28")
	}
	if snap.byIP[netip.MustParseAddr("10.50.0.7")] != "h-7" {
		t.Fatalf("10.50.0.7 not assigned in the /28: %v", snap.byIP)
	}

	// Blocks that overlap already (written by an older IPAM): refused.
	over := NewBlock(netip.MustParsePrefix("10.50.0.0/24"), "old-node", metav1.Now())
	if _, err := s.Create(ctx, over); err != nil {
		t.Fatal(err)
	}
	err = a.AssignIP(ctx, AssignIPArgs{IP: netip.MustParseAddr("10.50.0.9"), HandleID: "h-9", Hostname: "other"})
	if !errors.Is(err, ErrOverlappingBlocks) {
		t.Fatalf("AssignIP into overlapping blocks: %v", err)
	}
}

// TestPoolHiddenByPassingClaimOfOverlappingPool: the small pool's node
// has filled its block when a block of the overlapping pool appears over
// the whole small pool (another node's claim, later than the node's block,
// so about to be undone). An allocation meanwhile can neither claim a new
// block (every one overlaps it) nor borrow (it overlaps the node's block):
// it waits for the claim to be undone instead of calling the pool
// exhausted (CI once saw that answer), and then takes a new block that
// overlaps nothing.
func TestPoolHiddenByPassingClaimOfOverlappingPool(t *testing.T) {
	big, small := overlapPools()
	s, a := newFake(t, pool("big", big.String(), 24), pool("small", small.String(), 28))
	node := nodeStartingAt(t, "small", small, 28, netip.MustParsePrefix("10.50.0.0/28"))
	for i := range 16 {
		args := podArgs(node, fmt.Sprintf("pod%d", i), 1, 0)
		args.IPv4Pools = []string{"small"}
		mustAssign(t, a, args)
	}
	passing, err := s.Create(context.Background(), NewBlock(netip.MustParsePrefix("10.50.0.0/24"), "big-0", metav1.Now()))
	if err != nil {
		t.Fatal(err)
	}
	undone := make(chan error, 1)
	go func() {
		time.Sleep(30 * time.Millisecond)
		// As undoClaim: only the block as created, still empty.
		_, err := s.Delete(context.Background(), datastore.KeyOf(passing), datastore.DeleteOptions{ResourceVersion: passing.GetResourceVersion()})
		undone <- err
	}()
	args := podArgs(node, "pod16", 1, 0)
	args.IPv4Pools = []string{"small"}
	ips := mustAssign(t, a, args)
	if err := <-undone; err != nil {
		t.Fatalf("undoing the passing claim: %v", err)
	}
	if !small.Contains(ips[0]) {
		t.Fatalf("got %s, want an address of %s", ips[0], small)
	}
	checkStore(t, s)
}
