//go:build privileged && linux

package dataplane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/netnstest"
)

func addMember(r dataplane.ExecRunner, set, member string) error {
	return r.UpdateIPSetMembers(context.Background(), []dataplane.IPSetMemberUpdate{{
		Set: set, Type: calc.HashNet, Family: "inet", Add: []string{member},
	}})
}

// TestPrivilegedIPSetHandleHoldsNamespaceUntilClosed: the netlink socket
// kept for a namespace keeps it alive (a veth peer that lived in it stays)
// after its worker thread is gone; once the handle is closed the kernel
// frees the namespace. An unused handle closes by itself.
func TestPrivilegedIPSetHandleHoldsNamespaceUntilClosed(t *testing.T) {
	defer dataplane.SetNetnsWorkerIdle(200 * time.Millisecond)()
	restoreIdle := dataplane.SetIPSetHandleIdle(time.Hour)
	a, b := netnstest.New(t), netnstest.New(t)
	addVeth(t, a, "nlh-a", "nlh-b")
	if err := a.Do(func(ns.NetNS) error {
		peer, err := netlink.LinkByName("nlh-b")
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(peer, int(b.Fd()))
	}); err != nil {
		t.Fatal(err)
	}
	path, id := a.Path(), netnsID(t, a.Path())
	ra, rb := dataplane.ExecRunner{NetnsPath: path}, dataplane.ExecRunner{NetnsPath: b.Path()}
	run(t, ra, "ipset", "create", "cali40s:h", "hash:net")
	if err := addMember(ra, "cali40s:h", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if !dataplane.IPSetHandleOpen(path) {
		t.Fatal("no handle after an update")
	}
	_ = a.Close()
	if err := testutils.UnmountNS(a); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the worker to exit", func() bool {
		return !dataplane.NetnsWorkerLive(path) && threadsIn(t, id) == 0
	})
	run(t, rb, "ip", "link", "show", "nlh-b") // still there: the socket holds a
	dataplane.DropIPSetHandle(path)
	waitUntil(t, 30*time.Second, "the kernel to free the namespace (veth peer gone)", func() bool {
		_, err := rb.Run(context.Background(), "ip", []string{"link", "show", "nlh-b"}, nil)
		return err != nil && strings.Contains(err.Error(), "does not exist")
	})

	restoreIdle()
	defer dataplane.SetIPSetHandleIdle(300 * time.Millisecond)()
	run(t, rb, "ipset", "create", "cali40s:h", "hash:net")
	if err := addMember(rb, "cali40s:h", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "an unused handle to close", func() bool { return !dataplane.IPSetHandleOpen(b.Path()) })
	if err := addMember(rb, "cali40s:h", "10.0.0.2"); err != nil {
		t.Fatalf("update after the idle close: %v", err)
	}
	if got := run(t, rb, "ipset", "list", "cali40s:h"); !strings.Contains(got, "10.0.0.1\n10.0.0.2") && !strings.Contains(got, "10.0.0.2\n10.0.0.1") {
		t.Fatalf("set holds:\n%s", got)
	}
}

// TestPrivilegedIPSetHandleFollowsThePath: when the path comes to name
// another namespace, updates go to that one (a new socket, opened by a
// new worker), never to the one the path named before; so do commands.
func TestPrivilegedIPSetHandleFollowsThePath(t *testing.T) {
	a, b := netnstest.New(t), netnstest.New(t)
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bind := func(from string) {
		t.Helper()
		if err := unix.Mount(from, path, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	ra, rb := dataplane.ExecRunner{NetnsPath: a.Path()}, dataplane.ExecRunner{NetnsPath: b.Path()}
	run(t, ra, "ipset", "create", "cali40s:f", "hash:net")
	run(t, rb, "ipset", "create", "cali40s:f", "hash:net")
	r := dataplane.ExecRunner{NetnsPath: path}
	bind(a.Path())
	if err := addMember(r, "cali40s:f", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(path, 0); err != nil {
		t.Fatal(err)
	}
	bind(b.Path())
	if err := addMember(r, "cali40s:f", "10.0.0.2"); err != nil {
		t.Fatal(err)
	}
	run(t, r, "ipset", "add", "cali40s:f", "10.0.0.3")
	if got := run(t, ra, "ipset", "save"); !strings.Contains(got, "add cali40s:f 10.0.0.1\n") || strings.Contains(got, "10.0.0.2") ||
		strings.Contains(got, "10.0.0.3") {
		t.Errorf("first namespace holds:\n%s", got)
	}
	if got := run(t, rb, "ipset", "save"); !strings.Contains(got, "add cali40s:f 10.0.0.2\n") || !strings.Contains(got, "add cali40s:f 10.0.0.3\n") ||
		strings.Contains(got, "10.0.0.1") {
		t.Errorf("second namespace holds:\n%s", got)
	}
}

// TestPrivilegedIPSetMembersBadPath: a path that is missing or is not a
// network namespace gives an error naming it; the update is made nowhere
// (in particular not in the test's own namespace).
func TestPrivilegedIPSetMembersBadPath(t *testing.T) {
	netnstest.RequireRoot(t)
	dir := t.TempDir()
	notNetns := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(notNetns, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing"), notNetns, "/proc/self/ns/uts"} {
		// The set name exists nowhere, so an update made in a wrong
		// namespace would fail too: the error must be about the path.
		err := addMember(dataplane.ExecRunner{NetnsPath: path}, "cali40s:nowhere", "10.0.0.1")
		if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "cali40s:nowhere") {
			t.Errorf("%s: %v; want an error about the path", path, err)
		}
		if dataplane.IPSetHandleOpen(path) {
			t.Errorf("%s: a failed handle stays registered", path)
		}
	}
}

// TestPrivilegedIPSetMembersCallersNamespace: with no NetnsPath, members
// are written in the caller's namespace, as commands are run there: a
// goroutine locked into a test namespace writes there (not to the host,
// nor through a socket kept from a caller in another namespace).
func TestPrivilegedIPSetMembersCallersNamespace(t *testing.T) {
	n1, n2 := netnstest.New(t), netnstest.New(t)
	t.Cleanup(func() { dataplane.DropIPSetHandle("") })
	for i, n := range []ns.NetNS{n1, n2} {
		rn := dataplane.ExecRunner{NetnsPath: n.Path()}
		run(t, rn, "ipset", "create", "cali40s:callerns", "hash:net")
		member := fmt.Sprintf("10.0.0.%d", i+1)
		if err := n.Do(func(ns.NetNS) error { return addMember(dataplane.ExecRunner{}, "cali40s:callerns", member) }); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range []ns.NetNS{n1, n2} {
		got := run(t, dataplane.ExecRunner{NetnsPath: n.Path()}, "ipset", "save")
		if want := fmt.Sprintf("add cali40s:callerns 10.0.0.%d\n", i+1); !strings.Contains(got, want) || strings.Count(got, "add ") != 1 {
			t.Errorf("namespace %d holds:\n%s\nwant only %s", i+1, got, want)
		}
	}
}
