package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

func TestAutoAssignClaimsAndReusesAffineBlock(t *testing.T) {
	s, a := newFake(t, pool("p4", "10.0.0.0/24", 26))
	ips := mustAssign(t, a, podArgs("n1", "a", 1, 0))
	ips2 := mustAssign(t, a, podArgs("n1", "b", 2, 0))
	snap := checkStore(t, s)
	if len(snap.blocks) != 1 {
		t.Fatalf("want 1 block, got %d", len(snap.blocks))
	}
	var cidr netip.Prefix
	for c, b := range snap.blocks {
		cidr = c
		if *b.Spec.Affinity != "host:n1" {
			t.Fatalf("block affinity %s", *b.Spec.Affinity)
		}
	}
	if got := snap.affinities[cidr]; len(got) != 1 || got[0].Spec.State != v3.BlockAffinityStateConfirmed || got[0].Spec.Node != "n1" {
		t.Fatalf("affinities %+v", got)
	}
	for _, ip := range append(ips, ips2...) {
		if !cidr.Contains(ip) {
			t.Errorf("%s not from the affine block %s", ip, cidr)
		}
	}
	if ips[0] != OrdinalToIP(cidr, 0) || ips2[1] != OrdinalToIP(cidr, 2) {
		t.Errorf("not lowest-first: %v %v", ips, ips2)
	}
	if snap.handles["k8s-pod-network.b"][cidr.String()] != 2 {
		t.Errorf("handle b: %v", snap.handles["k8s-pod-network.b"])
	}
}

func TestDualStackAndV6Only(t *testing.T) {
	s, a := newFake(t, pool("p4", "10.0.0.0/24", 26), pool("p6", "fd00::/120", 122))
	ips := mustAssign(t, a, podArgs("n1", "a", 1, 1))
	if len(ips) != 2 || !ips[0].Is4() || !ips[1].Is6() {
		t.Fatalf("dual stack: %v", ips)
	}
	ips = mustAssign(t, a, podArgs("n1", "b", 0, 1))
	if len(ips) != 1 || !ips[0].Is6() {
		t.Fatalf("v6 only: %v", ips)
	}
	snap := checkStore(t, s)
	if len(snap.handles["k8s-pod-network.a"]) != 2 {
		t.Errorf("dual-stack handle %v", snap.handles["k8s-pod-network.a"])
	}
}

func TestFullBlockClaimsAnother(t *testing.T) {
	s, a := newFake(t, pool("p4", "10.0.0.0/24", 28))
	for i := range 20 {
		mustAssign(t, a, podArgs("n1", "p"+string(rune('a'+i)), 1, 0))
	}
	snap := checkStore(t, s)
	if len(snap.blocks) != 2 || len(snap.byIP) != 20 {
		t.Fatalf("blocks %d ips %d", len(snap.blocks), len(snap.byIP))
	}
	// A request bigger than a block spans blocks.
	mustAssign(t, a, podArgs("n1", "big", 30, 0))
	snap = checkStore(t, s)
	if len(snap.byIP) != 50 || len(snap.blocks) != 4 {
		t.Fatalf("blocks %d ips %d", len(snap.blocks), len(snap.byIP))
	}
}

func TestBorrowingAndStrictAffinity(t *testing.T) {
	// One block in the pool: n1 claims it; n2 may only borrow.
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "borrow", true: "strict"}[strict], func(t *testing.T) {
			s, a := newFake(t, pool("tiny", "10.0.0.0/26", 26), ipamConfig(strict))
			mustAssign(t, a, podArgs("n1", "a", 1, 0))
			ips, err := a.AutoAssign(context.Background(), podArgs("n2", "b", 1, 0))
			if strict {
				if !errors.Is(err, ErrPoolExhausted) || !strings.Contains(err.Error(), "n2") || !strings.Contains(err.Error(), "tiny") {
					t.Fatalf("err = %v, want pool exhausted naming node n2 and pool tiny", err)
				}
				snap := checkStore(t, s)
				if len(snap.byIP) != 1 || len(snap.handles) != 1 {
					t.Fatalf("failed allocation left state: %v %v", snap.byIP, snap.handles)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			snap := checkStore(t, s)
			for _, b := range snap.blocks {
				if *b.Spec.Affinity != "host:n1" {
					t.Fatal("borrowing moved the block's affinity")
				}
			}
			if len(ips) != 1 || snap.byIP[ips[0]] != "k8s-pod-network.b" {
				t.Fatalf("borrowed %v", ips)
			}
		})
	}
}

func TestPoolExhausted(t *testing.T) {
	s, a := newFake(t, pool("tiny", "10.0.0.0/30", 30))
	mustAssign(t, a, podArgs("n1", "a", 4, 0))
	_, err := a.AutoAssign(context.Background(), podArgs("n1", "b", 1, 0))
	if !errors.Is(err, ErrPoolExhausted) || !strings.Contains(err.Error(), "tiny (10.0.0.0/30)") || !strings.Contains(err.Error(), "node n1") {
		t.Fatalf("err = %v", err)
	}
	// A request that can be half met leaves nothing behind.
	if _, err := a.ReleaseByHandle(context.Background(), "k8s-pod-network.a"); err != nil {
		t.Fatal(err)
	}
	_, err = a.AutoAssign(context.Background(), podArgs("n1", "c", 5, 0))
	if !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("err = %v", err)
	}
	if snap := checkStore(t, s); len(snap.byIP) != 0 || len(snap.handles) != 0 {
		t.Fatalf("partial allocation left behind: %v", snap.byIP)
	}
}

func TestReservationsNeverHandedOut(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/28", 28), reservation("r", "10.0.0.0/30", "10.0.0.9/32"))
	ips := mustAssign(t, a, podArgs("n1", "a", 11, 0))
	for _, ip := range ips {
		if netip.MustParsePrefix("10.0.0.0/30").Contains(ip) || ip == netip.MustParseAddr("10.0.0.9") {
			t.Errorf("reserved %s handed out", ip)
		}
	}
	if _, err := a.AutoAssign(context.Background(), podArgs("n1", "b", 1, 0)); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("err = %v, want exhausted (only reserved addresses left)", err)
	}
	err := a.AssignIP(context.Background(), AssignIPArgs{IP: netip.MustParseAddr("10.0.0.1"), HandleID: "x", Hostname: "n1"})
	if !errors.Is(err, ErrReserved) {
		t.Fatalf("AssignIP reserved: %v", err)
	}
	checkStore(t, s)
}

func TestDisabledAndUnknownPools(t *testing.T) {
	off := pool("off", "10.1.0.0/24", 26)
	off.Spec.Disabled = true
	s, a := newFake(t, off, pool("on", "10.2.0.0/24", 26))
	ips := mustAssign(t, a, podArgs("n1", "a", 1, 0))
	if !netip.MustParsePrefix("10.2.0.0/24").Contains(ips[0]) {
		t.Fatalf("got %s from a disabled pool", ips[0])
	}
	args := podArgs("n1", "b", 1, 0)
	args.IPv4Pools = []string{"off"}
	if _, err := a.AutoAssign(context.Background(), args); !errors.Is(err, ErrPoolDisabled) {
		t.Fatalf("requested disabled pool: %v", err)
	}
	args.IPv4Pools = []string{"nope"}
	if _, err := a.AutoAssign(context.Background(), args); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("unknown pool: %v", err)
	}
	args = podArgs("n1", "c", 0, 1)
	if _, err := a.AutoAssign(context.Background(), args); !errors.Is(err, ErrNoPool) {
		t.Fatalf("no v6 pool: %v", err)
	}
	if err := a.AssignIP(context.Background(), AssignIPArgs{IP: netip.MustParseAddr("10.1.0.5"), HandleID: "x", Hostname: "n1"}); !errors.Is(err, ErrPoolDisabled) {
		t.Fatalf("AssignIP in disabled pool: %v", err)
	}
	if snap := checkStore(t, s); len(snap.byIP) != 1 {
		t.Fatalf("errors changed state: %v", snap.byIP)
	}
}

func TestRequestedPoolAndNodeSelector(t *testing.T) {
	rack := pool("rack-a", "10.1.0.0/24", 26)
	rack.Spec.NodeSelector = "rack == 'a'"
	node := &v3.Node{ObjectMeta: metaNamed("n-a")}
	node.Kind, node.APIVersion = v3.KindNode, v3.GroupVersion
	node.Labels = map[string]string{"rack": "a"}
	s, a := newFake(t, rack, pool("default", "10.2.0.0/24", 26), node)
	// n-b does not match rack-a's selector.
	ips := mustAssign(t, a, podArgs("n-b", "x", 1, 0))
	if !netip.MustParsePrefix("10.2.0.0/24").Contains(ips[0]) {
		t.Fatalf("n-b got %s", ips[0])
	}
	args := podArgs("n-b", "y", 1, 0)
	args.IPv4Pools = []string{"10.1.0.0/24"}
	ips = mustAssign(t, a, args)
	if !netip.MustParsePrefix("10.1.0.0/24").Contains(ips[0]) {
		t.Fatalf("requested pool ignored: %s", ips[0])
	}
	args = podArgs("n-a", "z", 1, 0)
	args.IPv4Pools = []string{"rack-a"}
	ips = mustAssign(t, a, args)
	if !netip.MustParsePrefix("10.1.0.0/24").Contains(ips[0]) {
		t.Fatalf("n-a got %s", ips[0])
	}
	checkStore(t, s)
}

func TestAssignIP(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26), pool("p6", "fd00::/120", 122))
	ctx := context.Background()
	ip := netip.MustParseAddr("10.0.0.77")
	if err := a.AssignIP(ctx, AssignIPArgs{IP: ip, HandleID: "h1", Hostname: "n1", Attrs: map[string]string{AttrPod: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.AssignIP(ctx, AssignIPArgs{IP: ip, HandleID: "h2", Hostname: "n2"}); !errors.Is(err, ErrInUse) {
		t.Fatalf("second assign: %v", err)
	}
	if err := a.AssignIP(ctx, AssignIPArgs{IP: netip.MustParseAddr("10.9.0.1"), HandleID: "h3", Hostname: "n1"}); !errors.Is(err, ErrNotInPool) {
		t.Fatalf("outside pools: %v", err)
	}
	if err := a.AssignIP(ctx, AssignIPArgs{IP: netip.MustParseAddr("fd00::9"), HandleID: "h1", Hostname: "n1"}); err != nil {
		t.Fatal(err)
	}
	snap := checkStore(t, s)
	if snap.byIP[ip] != "h1" || len(snap.handles["h1"]) != 2 {
		t.Fatalf("%v %v", snap.byIP, snap.handles)
	}
	b := snap.blocks[netip.MustParsePrefix("10.0.0.64/26")]
	if b == nil || *b.Spec.Affinity != "host:n1" {
		t.Fatalf("block of a specific address not claimed for n1")
	}
	if _, err := a.ReleaseByHandle(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	if snap := checkStore(t, s); len(snap.byIP) != 0 {
		t.Fatal(snap.byIP)
	}
}

func TestReleaseKeepsEmptyBlockAffinity(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26))
	ctx := context.Background()
	ips := mustAssign(t, a, podArgs("n1", "a", 2, 0))
	got, err := a.ReleaseByHandle(ctx, "k8s-pod-network.a")
	if err != nil || len(got) != 2 {
		t.Fatalf("released %v, %v", got, err)
	}
	if _, err := a.ReleaseByHandle(ctx, "k8s-pod-network.a"); !errors.Is(err, ErrHandleNotFound) {
		t.Fatalf("second release: %v", err)
	}
	snap := checkStore(t, s)
	if len(snap.blocks) != 1 || len(snap.handles) != 0 {
		t.Fatalf("blocks %d handles %v", len(snap.blocks), snap.handles)
	}
	for _, as := range snap.affinities {
		if as[0].Spec.State != v3.BlockAffinityStateConfirmed {
			t.Fatal("empty block lost its affinity")
		}
	}
	// Released addresses are reused last.
	next := mustAssign(t, a, podArgs("n1", "b", 1, 0))
	if next[0] == ips[0] || next[0] == ips[1] {
		t.Errorf("released address %s reused first", next[0])
	}
}

func TestReleaseIPs(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26))
	ctx := context.Background()
	ips := mustAssign(t, a, podArgs("n1", "a", 3, 0))
	got, err := a.ReleaseIPs(ctx, ips[1])
	if err != nil || len(got) != 1 {
		t.Fatalf("%v %v", got, err)
	}
	snap := checkStore(t, s)
	for _, c := range snap.handles["k8s-pod-network.a"] {
		if c != 2 {
			t.Fatalf("handle count %d after releasing one of 3", c)
		}
	}
	if got, _ := a.ReleaseIPs(ctx, ips[1]); len(got) != 0 {
		t.Fatalf("released a free address: %v", got)
	}
	if _, err := a.ReleaseIPs(ctx, netip.MustParseAddr("192.168.0.1")); !errors.Is(err, ErrNotInPool) {
		t.Fatalf("outside pools: %v", err)
	}
	if _, err := a.ReleaseIPs(ctx, ips[0], ips[2]); err != nil {
		t.Fatal(err)
	}
	if snap := checkStore(t, s); len(snap.handles) != 0 || len(snap.byIP) != 0 {
		t.Fatalf("left %v %v", snap.handles, snap.byIP)
	}
}

func TestDatastoreDownChangesNothing(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26))
	mustAssign(t, a, podArgs("n1", "a", 1, 0))
	before := checkStore(t, s)
	for _, failOp := range []string{"list", "get", "create", "update"} {
		t.Run(failOp, func(t *testing.T) {
			s.Fail = func(op string, k datastore.Key) error {
				if op == failOp {
					return &datastore.UnavailableError{Endpoints: []string{"x"}, Err: errBoom}
				}
				return nil
			}
			defer func() { s.Fail = nil }()
			a := New(s, Config{}) // no cache: every path reads
			_, err := a.AutoAssign(context.Background(), podArgs("n1", "b", 1, 0))
			if !errors.Is(err, datastore.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
		})
	}
	// The handle write fails after the block was written: rolled back.
	s.Fail = func(op string, k datastore.Key) error {
		if k.Kind == v3.KindIPAMHandle && op == "create" {
			return &datastore.UnavailableError{Err: errBoom}
		}
		return nil
	}
	_, err := a.AutoAssign(context.Background(), podArgs("n1", "c", 1, 0))
	s.Fail = nil
	if !errors.Is(err, datastore.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	after := checkStore(t, s)
	if len(after.byIP) != len(before.byIP) || len(after.handles) != len(before.handles) {
		t.Fatalf("state changed: %v -> %v", before.byIP, after.byIP)
	}
}

func TestConflictsAreRetried(t *testing.T) {
	s, a := newFake(t, pool("p", "10.0.0.0/24", 26))
	mustAssign(t, a, podArgs("n1", "a", 1, 0))
	var mu sync.Mutex
	n := 0
	s.Fail = func(op string, k datastore.Key) error {
		mu.Lock()
		defer mu.Unlock()
		if op == "update" && k.Kind == v3.KindIPAMBlock && n < 3 {
			n++
			return datastore.ErrConflict
		}
		return nil
	}
	mustAssign(t, a, podArgs("n1", "b", 1, 0))
	s.Fail = func(op string, k datastore.Key) error {
		if op == "update" && k.Kind == v3.KindIPAMBlock {
			return datastore.ErrConflict
		}
		return nil
	}
	_, err := a.AutoAssign(context.Background(), podArgs("n1", "c", 1, 0))
	s.Fail = nil
	if !errors.Is(err, ErrTooManyRetries) {
		t.Fatalf("endless conflicts: %v", err)
	}
	if snap := checkStore(t, s); len(snap.byIP) != 2 {
		t.Fatalf("%v", snap.byIP)
	}
}

func TestSteadyStateRoundTrips(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/16", 26))
	cnt := &ipamtest.Counter{Client: s}
	a := New(cnt, Config{CacheTTL: 1e12})
	mustAssign(t, a, podArgs("n1", "warm", 1, 0))
	cnt.Reset()
	mustAssign(t, a, podArgs("n1", "x", 1, 0))
	if cnt.Total() != 2 || cnt.Updates.Load() != 1 || cnt.Creates.Load() != 1 {
		t.Fatalf("steady state: %d round trips (updates %d creates %d gets %d lists %d), want 1 block CAS + 1 handle create",
			cnt.Total(), cnt.Updates.Load(), cnt.Creates.Load(), cnt.Gets.Load(), cnt.Lists.Load())
	}
	cnt.Reset()
	if _, err := a.ReleaseByHandle(context.Background(), "k8s-pod-network.x"); err != nil {
		t.Fatal(err)
	}
	t.Logf("release by handle: %d round trips", cnt.Total())
	// Without the settings cache (a CNI process) reads are added.
	b := New(cnt, Config{})
	mustAssign(t, b, podArgs("n1", "warm2", 1, 0))
	cnt.Reset()
	mustAssign(t, b, podArgs("n1", "y", 1, 0))
	t.Logf("uncached steady state: %d round trips (%d writes)", cnt.Total(), cnt.Updates.Load()+cnt.Creates.Load())
}

func TestConcurrentNodesOnFake(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/22", 28))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for n := range 3 {
		a := New(s, Config{})
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 30 {
					h := []byte{byte('a' + n), byte('a' + g), byte('a' + i%26), byte('a' + i/26)}
					args := podArgs("n"+string(rune('0'+n)), string(h), 1, 0)
					if _, err := a.AutoAssign(context.Background(), args); err != nil {
						errs <- err
						return
					}
					if i%3 == 0 {
						if _, err := a.ReleaseByHandle(context.Background(), args.HandleID); err != nil {
							errs <- err
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	snap := checkStore(t, s)
	if len(snap.byIP) != 3*4*20 {
		t.Errorf("%d addresses allocated, want %d", len(snap.byIP), 3*4*20)
	}
}

// TestFreshProcessRoundTrips: a fresh Allocator (a CNI ADD) that warms up
// reads everything in two read transactions (settings + labels +
// affinities, then the affine blocks) and then only writes: one block CAS
// and one handle create.
func TestFreshProcessRoundTrips(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/16", 29))
	filler := New(s, Config{})
	for i := range 12 { // two blocks on n1, the newest with room
		mustAssign(t, filler, podArgs("n1", fmt.Sprint("fill", i), 1, 0))
	}
	cnt := &ipamtest.Counter{Client: s}
	a := New(cnt, Config{CacheTTL: 5 * time.Second})
	if err := a.Warm(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	if got := cnt.MultiReads.Load(); cnt.Total() != 2 || got != 2 {
		t.Errorf("Warm: %d round trips (%d read transactions), want 2 read transactions", cnt.Total(), got)
	}
	cnt.Reset()
	mustAssign(t, a, podArgs("n1", "x", 1, 0))
	if cnt.Total() != 2 || cnt.Updates.Load() != 1 || cnt.Creates.Load() != 1 {
		t.Errorf("AutoAssign after Warm: %d round trips (updates %d creates %d gets %d lists %d multi %d), want 1 block CAS + 1 handle create",
			cnt.Total(), cnt.Updates.Load(), cnt.Creates.Load(), cnt.Gets.Load(), cnt.Lists.Load(), cnt.MultiReads.Load())
	}
	// Without Warm and without a settings cache: the same reads, made by
	// AutoAssign itself.
	cnt.Reset()
	mustAssign(t, New(cnt, Config{}), podArgs("n1", "y", 1, 0))
	if cnt.Total() != 4 || cnt.MultiReads.Load() != 2 {
		t.Errorf("cold AutoAssign: %d round trips (%d read transactions), want 2 read transactions + 2 writes", cnt.Total(), cnt.MultiReads.Load())
	}
}

// TestWarmWithHints: blocks an earlier process saw affine are read in the
// first transaction, so a fresh allocator needs one read transaction; a
// hint that is not (or no longer) affine is ignored and costs the second
// read as without hints, and the allocation stays correct.
func TestWarmWithHints(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/16", 29))
	filler := New(s, Config{})
	for i := range 12 { // two blocks on n1, the newest with room
		mustAssign(t, filler, podArgs("n1", fmt.Sprint("fill", i), 1, 0))
	}
	mustAssign(t, filler, podArgs("n2", "other", 1, 0))
	hints := filler.AffineBlocks("n1")
	if len(hints) != 2 {
		t.Fatalf("AffineBlocks(n1) = %v, want two blocks", hints)
	}
	for _, c := range []struct {
		name      string
		hints     []netip.Prefix
		wantReads int64
	}{
		{"right hints", hints, 1},
		{"no hints", nil, 2},
		{"another node's block", filler.AffineBlocks("n2"), 2},
	} {
		cnt := &ipamtest.Counter{Client: s}
		a := New(cnt, Config{CacheTTL: 5 * time.Second})
		if err := a.Warm(context.Background(), "n1", c.hints...); err != nil {
			t.Fatal(err)
		}
		if got := cnt.MultiReads.Load(); cnt.Total() != c.wantReads || got != c.wantReads {
			t.Errorf("%s: Warm made %d round trips (%d read transactions), want %d", c.name, cnt.Total(), got, c.wantReads)
		}
		cnt.Reset()
		mustAssign(t, a, podArgs("n1", "x-"+c.name, 1, 0))
		if cnt.Total() != 2 || cnt.Updates.Load() != 1 || cnt.Creates.Load() != 1 {
			t.Errorf("%s: AutoAssign after Warm made %d round trips, want 1 block CAS + 1 handle create", c.name, cnt.Total())
		}
	}
	checkStore(t, s)
}
