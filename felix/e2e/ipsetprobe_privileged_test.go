//go:build privileged && integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// ipsetProbes are the netlink handles of the member probes (waitMember),
// one per namespace path, each opened on its first probe and closed when
// the benchmark or test that opened it ends.
var ipsetProbes = struct {
	sync.Mutex
	byPath map[string]*netlink.Handle
}{byPath: map[string]*netlink.Handle{}}

// ipsetHas reports whether set holds ip in run's namespace, asking the
// kernel over netlink (IPSET_CMD_TEST) rather than starting an `ipset
// test` process: a probe every millisecond then costs little CPU beside
// the felix being measured. An error (the set does not exist yet) is
// returned with false.
func ipsetHas(tb testing.TB, run dataplane.Runner, set, ip string) (bool, error) {
	h := ipsetProbe(tb, run)
	addr := net.ParseIP(ip)
	if addr == nil {
		tb.Fatalf("probe: %q is no IP address", ip)
	}
	return h.IpsetTest(set, &netlink.IPSetEntry{IP: addr})
}

func ipsetProbe(tb testing.TB, run dataplane.Runner) *netlink.Handle {
	er, ok := run.(dataplane.ExecRunner)
	if !ok || er.NetnsPath == "" {
		tb.Fatalf("probe: want an ExecRunner for a namespace, got %#v", run)
	}
	path := er.NetnsPath
	ipsetProbes.Lock()
	defer ipsetProbes.Unlock()
	if h := ipsetProbes.byPath[path]; h != nil {
		return h
	}
	h, err := openProbe(path)
	if err != nil {
		tb.Fatalf("probe: %v", err)
	}
	ipsetProbes.byPath[path] = h
	tb.Cleanup(func() {
		ipsetProbes.Lock()
		defer ipsetProbes.Unlock()
		delete(ipsetProbes.byPath, path)
		h.Close()
	})
	return h
}

func openProbe(path string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netlink socket in %s: %w", path, err)
	}
	return h, nil
}

// TestPrivilegedIPSetProbe: the scale benchmark's member probe sees what
// `ipset` sees, in the namespace it is given (not the host's).
func TestPrivilegedIPSetProbe(t *testing.T) {
	n := netnstest.New(t)
	run := dataplane.ExecRunner{NetnsPath: n.Path()}
	if in, err := ipsetHas(t, run, "cali40s:probe", "10.1.2.3"); in || err == nil {
		t.Fatalf("missing set: %v, %v; want false and an error", in, err)
	}
	for _, args := range [][]string{{"create", "cali40s:probe", "hash:net"}, {"add", "cali40s:probe", "10.1.0.0/16"}} {
		if _, err := run.Run(context.Background(), "ipset", args, nil); err != nil {
			t.Fatal(err)
		}
	}
	for ip, want := range map[string]bool{"10.1.2.3": true, "10.2.0.1": false} {
		if in, err := ipsetHas(t, run, "cali40s:probe", ip); in != want || err != nil {
			t.Errorf("%s: %v, %v; want %v", ip, in, err, want)
		}
	}
}

// TestPrivilegedNftSetProbe: the nftables member probe sees what nft
// sees, in a hash set and an interval set (a host as an interval start),
// in the namespace it is given.
func TestPrivilegedNftSetProbe(t *testing.T) {
	n := netnstest.New(t)
	run := dataplane.ExecRunner{NetnsPath: n.Path()}
	if in, _ := nftSetHas(t, run, "cali40s-probe", "10.1.2.3"); in {
		t.Fatal("missing set: true, want false (the kernel says ENOENT for a missing set as for a missing element)")
	}
	if _, err := run.Run(context.Background(), "nft", []string{"-f", "-"}, []byte("table ip calico {\n"+
		" set cali40s-probe { type ipv4_addr; elements = { 10.1.2.3 } }\n"+
		" set cali40s-iv { type ipv4_addr; flags interval; elements = { 10.1.2.3, 10.9.0.0/16 } }\n}\n")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set, ip string
		want    bool
	}{{"cali40s-probe", "10.1.2.3", true}, {"cali40s-probe", "10.1.2.4", false},
		{"cali40s-iv", "10.1.2.3", true}, {"cali40s-iv", "10.1.2.4", false}} {
		if in, err := nftSetHas(t, run, c.set, c.ip); in != c.want || (err != nil) {
			t.Errorf("%s %s: %v, %v; want %v", c.set, c.ip, in, err, c.want)
		}
	}
}
