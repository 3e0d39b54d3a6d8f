package syncserver_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/syncserver"
)

// openClients connects n plain clients that read until closed; each one's
// channel closes when its connection ends.
func openClients(t *testing.T, addr string, n int) []chan struct{} {
	t.Helper()
	var ends []chan struct{}
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		w := bufio.NewWriter(c)
		if err := syncproto.NewEncoder(w).Send(syncproto.MsgClientHello{Hostname: "n", SyncerType: syncproto.SyncerTypeFelix}); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		end := make(chan struct{})
		go func() { defer close(end); _, _ = io.Copy(io.Discard, c) }()
		ends = append(ends, end)
	}
	return ends
}

func closed(ends []chan struct{}) int {
	n := 0
	for _, e := range ends {
		select {
		case <-e:
			n++
		default:
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConnectionLimitAndGracefulShutdown: above its limit the server drops
// connections one at a time down to the limit (rebalancing); when its
// context ends it drops the rest one at a time (graceful shutdown), not
// all at once.
func TestConnectionLimitAndGracefulShutdown(t *testing.T) {
	cache := snapcache.New("felix", time.Now, nil, nil)
	cache.OnStatusUpdated(datastore.StatusInSync)
	srv, addr, cancel := serve(t, cache, syncserver.Config{DropInterval: 20 * time.Millisecond, ShutdownTimeout: 2 * time.Second})

	ends := openClients(t, addr, 10)
	waitFor(t, "10 clients", func() bool { return srv.Clients() == 10 })
	srv.SetMaxConns(4)
	waitFor(t, "6 clients dropped", func() bool { return closed(ends) == 6 && srv.Clients() == 4 })
	time.Sleep(100 * time.Millisecond) // five more drop intervals
	if n := closed(ends); n != 6 {
		t.Fatalf("%d clients dropped at a limit of 4 of 10, want 6", n)
	}

	cancel()
	seen := map[int]bool{}
	waitFor(t, "every client dropped", func() bool {
		seen[closed(ends)] = true
		return closed(ends) == 10
	})
	if !seen[7] || !seen[8] {
		t.Errorf("the shutdown closed the connections at once (counts seen %v), not one at a time", seen)
	}
}
