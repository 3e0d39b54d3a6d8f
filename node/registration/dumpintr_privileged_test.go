//go:build privileged

package registration

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedNetlinkEnvWhileLinksChange: interfaces come and go while
// calico-node lists them (the CNI plugin wires pods as the agent starts);
// the kernel then marks a dump interrupted (NLM_F_DUMP_INTR) and netlink
// answers ErrDumpInterrupted. NetlinkEnv reads again instead of failing
// (calico-node exited with "listing interfaces: results may be incomplete
// or inconsistent" in a fresh `make lab`).
func TestPrivilegedNetlinkEnvWhileLinksChange(t *testing.T) {
	ns := netnstest.New(t)
	handle := func() *netlink.Handle {
		h, err := netlink.NewHandleAt(netns.NsHandle(int(ns.Fd())))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h
	}
	h := handle()
	// Enough links (150 veth pairs) that a dump spans several messages.
	veth := func(name string) netlink.Link {
		return &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
	}
	for i := range 150 {
		if err := h.LinkAdd(veth(fmt.Sprintf("d%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	churnHandle := handle()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		churn := churnHandle
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			l := veth(fmt.Sprintf("c%d", i%20))
			if err := churn.LinkAdd(l); err == nil {
				_ = churn.LinkDel(l)
			}
		}
	}()
	defer wg.Wait()
	defer close(stop)
	for i := range 200 {
		env, err := NetlinkEnv(h)
		if err != nil {
			t.Fatalf("listing %d: %v", i, err)
		}
		if len(env.Interfaces) < 301 {
			t.Fatalf("listing %d: %d interfaces, want the 300 veth ends and lo at least", i, len(env.Interfaces))
		}
	}
}
