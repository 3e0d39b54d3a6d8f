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

// TestConcurrentWithFailures runs goroutines on three nodes (two
// Allocators per node, as two processes) that allocate and release at
// random against a fake store failing 5% of calls before applying them and
// 3% of writes after applying them (ambiguous failures). A shared table flags
// any address handed out twice; failed allocations are followed by a DEL
// of their handle and failed releases are retried, as a runtime would. At
// the end everything is released, one GC pass runs, and the store must be
// empty and consistent.
func TestConcurrentWithFailures(t *testing.T) {
	s := ipamtest.NewStore()
	mustCreate(t, s, pool("p", "10.0.0.0/24", 28))
	var fmu sync.Mutex
	frng := rand.New(rand.NewPCG(1, 2))
	failing := true
	s.Fail = func(op string, k datastore.Key) error {
		fmu.Lock()
		defer fmu.Unlock()
		if !failing || frng.Float64() >= 0.05 {
			return nil
		}
		if op == "update" && frng.IntN(2) == 0 {
			return datastore.ErrConflict
		}
		return &datastore.UnavailableError{Err: errBoom}
	}
	s.FailAfter = func(op string, k datastore.Key) error {
		fmu.Lock()
		defer fmu.Unlock()
		if !failing || frng.Float64() >= 0.03 {
			return nil
		}
		return &datastore.UnavailableError{Err: errBoom} // applied, but reported failed
	}
	ctx := context.Background()
	quiet := Config{MaxRetries: 6, Logger: slog.New(slog.DiscardHandler)}
	var live sync.Map
	var wg sync.WaitGroup
	var mu sync.Mutex
	held := map[string]bool{}
	for p := range 6 {
		a := New(s, quiet)
		node := fmt.Sprint("n", p%3)
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(p), uint64(g)))
				var mine []string
				ips := map[string][]netip.Addr{}
				for i := range 60 {
					if len(mine) > 0 && rng.IntN(3) == 0 {
						h := mine[0]
						mine = mine[1:]
						for _, ip := range ips[h] {
							live.Delete(ip)
						}
						for {
							_, err := a.ReleaseByHandle(ctx, h)
							if err == nil || errors.Is(err, ErrHandleNotFound) {
								break
							}
						}
						mu.Lock()
						delete(held, h)
						mu.Unlock()
						continue
					}
					h := fmt.Sprintf("k8s-pod-network.%d-%d-%d", p, g, i)
					args := podArgs(node, h, 1+rng.IntN(2), 0)
					args.HandleID = h
					got, err := a.AutoAssign(ctx, args)
					if err != nil {
						for { // DEL after a failed ADD
							_, err := a.ReleaseByHandle(ctx, h)
							if err == nil || errors.Is(err, ErrHandleNotFound) {
								break
							}
						}
						continue
					}
					for _, ip := range got {
						if prev, dup := live.LoadOrStore(ip, h); dup {
							t.Errorf("DUPLICATE %s: %v and %s", ip, prev, h)
						}
					}
					ips[h] = got
					mine = append(mine, h)
					mu.Lock()
					held[h] = true
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	fmu.Lock()
	failing = false
	fmu.Unlock()
	snap := checkStoreOpts(t, s, false)
	for ip, h := range snap.byIP {
		if v, ok := live.Load(ip); !ok || v != h {
			t.Errorf("store holds %s for %s, which nobody was given", ip, h)
		}
	}
	a := New(s, Config{})
	for h := range held {
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
	if snap := checkStore(t, s); len(snap.byIP) != 0 || len(snap.handles) != 0 {
		t.Fatalf("left: %v %v", snap.byIP, snap.handles)
	}
}
