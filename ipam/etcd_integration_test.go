//go:build integration

package ipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/testservers"
)

func etcdClient(t testing.TB, endpoint string) datastore.Client {
	t.Helper()
	c, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stressCycles is the allocate/release cycles per goroutine: the issue's
// 500, or 150 under the race detector (which slows this test ~4x);
// TABBY_IPAM_CYCLES overrides it.
func stressCycles() int {
	if v := os.Getenv("TABBY_IPAM_CYCLES"); v != "" {
		var n int
		fmt.Sscan(v, &n)
		return n
	}
	if raceEnabled {
		return 150
	}
	return 500
}

// TestIntegrationStress: 3 nodes x 8 goroutines x N allocate/release
// cycles against a real etcd, each node with its own client. Every
// goroutine keeps up to 4 addresses live; a shared table flags any address
// handed out while still held. At the end everything is released and the
// store must hold no allocation and no handle, with every block consistent.
func TestIntegrationStress(t *testing.T) {
	server := testservers.StartEtcd(t)
	setup := etcdClient(t, server.Endpoint())
	mustCreate(t, setup, pool("p", "10.0.0.0/20", 26), pool("p6", "fd00::/112", 122))
	cycles := stressCycles()
	ctx := context.Background()
	var live sync.Map // netip.Addr -> handle
	var dups, allocs atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	start := time.Now()
	for n := range 3 {
		a := New(etcdClient(t, server.Endpoint()), Config{CacheTTL: time.Second})
		node := fmt.Sprintf("node-%d", n)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var held []string
				release := func(h string, ips []netip.Addr) error {
					for _, ip := range ips {
						live.Delete(ip)
					}
					_, err := a.ReleaseByHandle(ctx, h)
					return err
				}
				heldIPs := map[string][]netip.Addr{}
				for i := range cycles {
					h := fmt.Sprintf("k8s-pod-network.%d-%d-%d", n, g, i)
					args := podArgs(node, fmt.Sprintf("p%d-%d-%d", n, g, i), 1, 0)
					args.HandleID = h
					if i%10 == 0 {
						args.Num6 = 1
					}
					ips, err := a.AutoAssign(ctx, args)
					if err != nil {
						errs <- fmt.Errorf("%s: %w", h, err)
						return
					}
					allocs.Add(int64(len(ips)))
					for _, ip := range ips {
						if prev, loaded := live.LoadOrStore(ip, h); loaded {
							dups.Add(1)
							t.Errorf("DUPLICATE %s: %s and %s", ip, prev, h)
						}
					}
					held = append(held, h)
					heldIPs[h] = ips
					if len(held) > 4 {
						if err := release(held[0], heldIPs[held[0]]); err != nil {
							errs <- err
							return
						}
						delete(heldIPs, held[0])
						held = held[1:]
					}
				}
				for _, h := range held {
					if err := release(h, heldIPs[h]); err != nil {
						errs <- err
						return
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
	el := time.Since(start)
	snap := checkStore(t, setup)
	if len(snap.byIP) != 0 || len(snap.handles) != 0 {
		t.Errorf("LEAKS: %d allocations, %d handles left", len(snap.byIP), len(snap.handles))
	}
	t.Logf("3 nodes x 8 goroutines x %d cycles: %d addresses allocated and released in %v (%.0f allocations/s incl. releases), %d duplicates, %d blocks",
		cycles, allocs.Load(), el.Round(time.Millisecond), float64(allocs.Load())/el.Seconds(), dups.Load(), len(snap.blocks))
}

// TestIntegrationLastBlockRace: two OS processes (this test binary
// re-executed) on two nodes race for the last free block of a pool.
// Exactly one claims it; the other borrows from it (strictAffinity false)
// or fails with the exhausted error naming the pool and its node.
func TestIntegrationLastBlockRace(t *testing.T) {
	for _, strict := range []bool{true, false} {
		t.Run(fmt.Sprint("strict=", strict), func(t *testing.T) {
			server := testservers.StartEtcd(t)
			c := etcdClient(t, server.Endpoint())
			mustCreate(t, c, pool("last", "10.9.0.0/25", 26), ipamConfig(strict))
			// node-0 takes one of the two blocks.
			mustAssign(t, New(c, Config{}), podArgs("node-0", "first", 1, 0))
			startAt := time.Now().Add(1500 * time.Millisecond)
			var outs [2][]byte
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.Command(os.Args[0]) // TestMain runs it as the child

					cmd.Env = append(os.Environ(),
						"TABBY_IPAM_HELPER=1",
						"TABBY_IPAM_ENDPOINT="+server.Endpoint(),
						fmt.Sprintf("TABBY_IPAM_NODE=racer-%d", i),
						fmt.Sprintf("TABBY_IPAM_START=%d", startAt.UnixNano()))
					outs[i], _ = cmd.CombinedOutput()
				}()
			}
			wg.Wait()
			var results [2]helperResult
			for i, out := range outs {
				line := ""
				for _, l := range strings.Split(string(out), "\n") {
					if strings.HasPrefix(l, "RESULT ") {
						line = strings.TrimPrefix(l, "RESULT ")
					}
				}
				if err := json.Unmarshal([]byte(line), &results[i]); err != nil {
					t.Fatalf("helper %d output: %s", i, out)
				}
			}
			snap := checkStore(t, c)
			owners := map[string]int{}
			for _, b := range snap.blocks {
				if b.Spec.Affinity != nil {
					owners[*b.Spec.Affinity]++
				}
			}
			if owners["host:racer-0"]+owners["host:racer-1"] != 1 {
				t.Fatalf("want exactly one racer to own a block, got %v (results %+v)", owners, results)
			}
			winner, loser := results[0], results[1]
			if owners["host:racer-1"] == 1 {
				winner, loser = results[1], results[0]
			}
			if winner.Err != "" || len(winner.IPs) != 1 {
				t.Fatalf("winner: %+v", winner)
			}
			if strict {
				if !strings.Contains(loser.Err, "pool exhausted") || !strings.Contains(loser.Err, "last (10.9.0.0/25)") || !strings.Contains(loser.Err, loser.Node) {
					t.Fatalf("loser error %q must say pool exhausted and name pool and node", loser.Err)
				}
			} else if loser.Err != "" || len(loser.IPs) != 1 {
				t.Fatalf("loser should have borrowed: %+v", loser)
			}
			t.Logf("winner %s got %v; loser %s: ips %v err %q", winner.Node, winner.IPs, loser.Node, loser.IPs, loser.Err)
		})
	}
}

type helperResult struct {
	Node string
	IPs  []string
	Err  string
}

// TestMain turns the test binary into the racing child process of
// TestIntegrationLastBlockRace when TABBY_IPAM_HELPER is set, instead of
// running the tests.
func TestMain(m *testing.M) {
	if os.Getenv("TABBY_IPAM_HELPER") == "1" {
		os.Exit(helperProcessAssign())
	}
	os.Exit(m.Run())
}

// helperProcessAssign allocates one address for its node at the agreed
// start time and prints the outcome as a RESULT line.
func helperProcessAssign() int {
	c, err := etcd.New(etcd.Config{Endpoints: []string{os.Getenv("TABBY_IPAM_ENDPOINT")}, RequestTimeout: 5 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	node := os.Getenv("TABBY_IPAM_NODE")
	a := New(c, Config{})
	ctx := context.Background()
	// Warm the connection, then start together.
	if _, err := a.loadEnv(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var at int64
	fmt.Sscan(os.Getenv("TABBY_IPAM_START"), &at)
	time.Sleep(time.Until(time.Unix(0, at)))
	ips, err := a.AutoAssign(ctx, podArgs(node, node+"-pod", 1, 0))
	r := helperResult{Node: node}
	for _, ip := range ips {
		r.IPs = append(r.IPs, ip.String())
	}
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Printf("RESULT %s\n", b)
	return 0
}

// TestIntegrationGC kills owners on a real etcd and checks GC frees exactly
// theirs.
func TestIntegrationGC(t *testing.T) {
	server := testservers.StartEtcd(t)
	c := etcdClient(t, server.Endpoint())
	mustCreate(t, c, pool("p", "10.0.0.0/24", 28), nodeObj("n1"), nodeObj("n2"))
	a := New(c, Config{})
	ctx := context.Background()
	keep := mustAssign(t, a, podArgs("n1", "keep", 1, 0))
	mustCreate(t, c, wep("default", "keep", "n1", keep...))
	gone := mustAssign(t, a, podArgs("n1", "gone", 1, 0))
	mustCreate(t, c, wep("default", "gone", "n1", gone...))
	n2 := mustAssign(t, a, podArgs("n2", "onn2", 1, 0))
	c.Delete(ctx, datastore.KeyOf(wep("default", "gone", "n1")), datastore.DeleteOptions{})
	c.Delete(ctx, datastore.KeyOf(nodeObj("n2")), datastore.DeleteOptions{})
	rep, err := a.CheckLeaks(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	freed, err := a.ReleaseLeaks(ctx, rep)
	if err != nil || len(freed) != 2 {
		t.Fatalf("freed %+v, %v", freed, err)
	}
	snap := checkStore(t, c)
	if _, ok := snap.byIP[keep[0]]; !ok || len(snap.byIP) != 1 {
		t.Fatalf("after GC: %v (kept %v, gone %v, n2 %v)", snap.byIP, keep, gone, n2)
	}
	for _, b := range snap.blocks {
		if b.Spec.Affinity != nil && *b.Spec.Affinity == "host:n2" {
			t.Fatal("deleted node still owns a block")
		}
	}
}

// TestIntegrationDatastoreDown: with etcd stopped, allocation fails with
// an error wrapping datastore.ErrUnavailable, and nothing was written.
func TestIntegrationDatastoreDown(t *testing.T) {
	server := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{server.Endpoint()}, RequestTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustCreate(t, c, pool("p", "10.0.0.0/24", 26))
	a := New(c, Config{})
	mustAssign(t, a, podArgs("n1", "a", 1, 0))
	server.Stop()
	_, err = a.AutoAssign(context.Background(), podArgs("n1", "b", 1, 0))
	if !errors.Is(err, datastore.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	server.Start()
	snap := checkStore(t, c)
	if len(snap.byIP) != 1 {
		t.Fatalf("after outage: %v", snap.byIP)
	}
}
