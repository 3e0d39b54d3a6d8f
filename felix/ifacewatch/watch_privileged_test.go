//go:build privileged

package ifacewatch

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedWatch: in a fresh namespace, the addresses at start are
// reported, then an address moved to another interface, and an
// interface renamed, each followed within a second.
func TestPrivilegedWatch(t *testing.T) {
	n := netnstest.New(t)
	h, err := netlink.NewHandleAt(netns.NsHandle(int(n.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// A veth pair (this kernel has no dummy module).
	must(h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dummy1"}, PeerName: "dummy2"}))
	link := func(name string) netlink.Link {
		l, err := h.LinkByName(name)
		must(err)
		return l
	}
	addr, _ := netlink.ParseAddr("192.168.51.1/24")
	must(h.AddrAdd(link("dummy1"), addr))

	var mu sync.Mutex
	var last map[string][]netip.Addr
	reports := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, Config{NetnsPath: n.Path(), Report: func(m map[string][]netip.Addr) {
			mu.Lock()
			last, reports = m, reports+1
			mu.Unlock()
		}})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	ip := netip.MustParseAddr("192.168.51.1")
	waitFor := func(what string, ok func(map[string][]netip.Addr) bool) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for {
			mu.Lock()
			m := last
			mu.Unlock()
			if m != nil && ok(m) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within 1s: %s; last report %v", what, m)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the address at start on dummy1", func(m map[string][]netip.Addr) bool {
		return slices.Contains(m["dummy1"], ip) && len(m["dummy2"]) == 0
	})
	must(h.AddrDel(link("dummy1"), addr))
	must(h.AddrAdd(link("dummy2"), addr))
	waitFor("the address moved to dummy2", func(m map[string][]netip.Addr) bool {
		return !slices.Contains(m["dummy1"], ip) && slices.Contains(m["dummy2"], ip)
	})
	must(h.LinkSetName(link("dummy1"), "renamed1"))
	waitFor("dummy1 renamed", func(m map[string][]netip.Addr) bool { _, ok := m["dummy1"]; _, ok2 := m["renamed1"]; return !ok && ok2 })
	if m, err := Read(n.Path()); err != nil || !slices.Contains(m["dummy2"], ip) {
		t.Errorf("Read = %v, %v; want the address on dummy2", m, err)
	}
	mu.Lock()
	n0 := reports
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if reports != n0 {
		t.Errorf("%d reports without a change, want none", reports-n0)
	}
}
