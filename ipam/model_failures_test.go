package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// TestModelWithFailures is the model test with a flaky datastore: during
// each operation any call may fail (unavailable, or a lost CAS). A failed
// allocation is followed by a release of its handle, as the CNI runtime's
// DEL would do; a failed release is retried. After every step the store's
// allocations must equal the model exactly and every block must be
// consistent; at the end, after releasing everything and one GC pass,
// nothing may be left: no address, no handle.
func TestModelWithFailures(t *testing.T) {
	for seed := range modelSeeds(12) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runFailureModel(t, seed, 200) })
	}
}

func runFailureModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	failRate := 0.0
	frng := rand.New(rand.NewPCG(seed, 99))
	ctx := context.Background()
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/26", 29), ipamConfig(seed%2 == 1))
	s.Fail = func(op string, k datastore.Key) error {
		mu.Lock()
		defer mu.Unlock()
		if frng.Float64() >= failRate {
			return nil
		}
		if (op == "update" || op == "delete") && frng.IntN(2) == 0 {
			return datastore.ErrConflict
		}
		return &datastore.UnavailableError{Err: errBoom}
	}
	setFail := func(r float64) { mu.Lock(); failRate = r; mu.Unlock() }
	quiet := Config{MaxRetries: 4, Logger: slog.New(slog.DiscardHandler)}
	allocs := []*Allocator{New(s, quiet), New(singleReads{s}, quiet), New(s, quiet)}
	model := map[netip.Addr]string{}
	handles := map[string][]netip.Addr{}
	failedAssigns, failedReleases, okAssigns := 0, 0, 0
	check := func(step int, what string) {
		t.Helper()
		snap := checkStoreOpts(t, s, false)
		if t.Failed() {
			t.Fatalf("step %d (%s): invariants broken", step, what)
		}
		if fmt.Sprint(snap.byIP) != fmt.Sprint(model) {
			t.Fatalf("step %d (%s): store %v, model %v", step, what, snap.byIP, model)
		}
	}
	for step := range steps {
		ai := rng.IntN(3)
		a, node := allocs[ai], fmt.Sprint("n", ai)
		setFail(0.07)
		switch op := rng.IntN(5); {
		case op < 3:
			h := fmt.Sprintf("k8s-pod-network.h%d", step)
			ips, err := a.AutoAssign(ctx, podArgs(node, fmt.Sprint("h", step), 1+rng.IntN(2), 0))
			setFail(0)
			if err != nil {
				failedAssigns++
				// The runtime's DEL after a failed ADD.
				if _, derr := a.ReleaseByHandle(ctx, h); derr != nil && !errors.Is(derr, ErrHandleNotFound) {
					t.Fatalf("step %d: DEL after failed ADD: %v", step, derr)
				}
				check(step, "failed assign + DEL")
				continue
			}
			okAssigns++
			for _, ip := range ips {
				model[ip] = h
			}
			handles[h] = ips
			check(step, "assign")
		default:
			if len(handles) == 0 {
				continue
			}
			hs := sortedKeys(handles)
			h := hs[rng.IntN(len(hs))]
			if op == 3 {
				_, err := a.ReleaseByHandle(ctx, h)
				setFail(0)
				if err != nil {
					failedReleases++
					if _, err := a.ReleaseByHandle(ctx, h); err != nil && !errors.Is(err, ErrHandleNotFound) {
						t.Fatalf("step %d: retried release: %v", step, err)
					}
				}
				for _, ip := range handles[h] {
					delete(model, ip)
				}
				delete(handles, h)
			} else {
				ip := handles[h][0]
				_, err := a.ReleaseIPs(ctx, ip)
				setFail(0)
				if err != nil {
					failedReleases++
					if _, err := a.ReleaseIPs(ctx, ip); err != nil {
						t.Fatalf("step %d: retried release of %s: %v", step, ip, err)
					}
				}
				delete(model, ip)
				handles[h] = handles[h][1:]
				if len(handles[h]) == 0 {
					delete(handles, h)
				}
			}
			check(step, "release")
		}
	}
	setFail(0)
	a := allocs[0]
	for _, h := range sortedKeys(handles) {
		if _, err := a.ReleaseByHandle(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := a.CheckLeaks(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReleaseLeaks(ctx, rep); err != nil {
		t.Fatal(err)
	}
	snap := checkStore(t, s)
	if len(snap.byIP) != 0 || len(snap.handles) != 0 {
		t.Fatalf("left behind: %v %v", snap.byIP, snap.handles)
	}
	t.Logf("%d assigns ok, %d failed, %d releases failed and retried", okAssigns, failedAssigns, failedReleases)
	if failedAssigns == 0 || failedReleases == 0 {
		t.Error("the injected failures never hit")
	}
}
