//go:build privileged && linux

package dataplane_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// netnsID is what readlink /proc/self/ns/net prints for the namespace at
// path.
func netnsID(t testing.TB, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("net:[%d]", fi.Sys().(*syscall.Stat_t).Ino)
}

// ownNetnsID is the namespace of the test process itself.
func ownNetnsID(t testing.TB) string {
	t.Helper()
	id, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// childNetns runs readlink in a child through r and returns the namespace
// the child was in.
func childNetns(ctx context.Context, r dataplane.ExecRunner) (string, error) {
	out, err := r.Run(ctx, "readlink", []string{"/proc/self/ns/net"}, nil)
	return strings.TrimSpace(string(out)), err
}

func addVeth(t *testing.T, n ns.NetNS, name, peer string) {
	t.Helper()
	err := n.Do(func(ns.NetNS) error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer})
	})
	if err != nil {
		t.Fatalf("adding veth %s: %v", name, err)
	}
}

// TestPrivilegedForkInheritsThreadNetns checks the premise ExecRunner
// rests on: os/exec forks from the thread that calls Start, so a child
// started by a goroutine locked to a thread that entered a namespace is
// in that namespace, every time; and a child started elsewhere is not.
func TestPrivilegedForkInheritsThreadNetns(t *testing.T) {
	n := netnstest.New(t)
	want, own := netnsID(t, n.Path()), ownNetnsID(t)
	if want == own {
		t.Fatalf("test namespace %s is the test's own", want)
	}
	got := make(chan string)
	offMainThread(func() {
		defer close(got)
		if err := unix.Setns(int(n.Fd()), unix.CLONE_NEWNET); err != nil {
			got <- "setns: " + err.Error()
			return
		}
		for range 20 {
			out, err := exec.Command("readlink", "/proc/self/ns/net").Output()
			if err != nil {
				got <- err.Error()
				continue
			}
			got <- strings.TrimSpace(string(out))
		}
	})
	for g := range got {
		if g != want {
			t.Errorf("child of the locked thread was in %q, want %s", g, want)
		}
	}
	out, err := exec.Command("readlink", "/proc/self/ns/net").Output()
	if err != nil || strings.TrimSpace(string(out)) != own {
		t.Errorf("child of an unlocked goroutine: %q, %v; want %s", out, err, own)
	}
}

// TestPrivilegedExecRunnerSeesItsNamespace: a command run for a namespace
// sees that namespace's links and not the root's, and vice versa; stdin
// and stdout pass through; a path naming the caller's own namespace works.
func TestPrivilegedExecRunnerSeesItsNamespace(t *testing.T) {
	ctx := context.Background()
	n := netnstest.New(t)
	addVeth(t, n, "xr-only-here", "xr-peer")
	r := dataplane.ExecRunner{NetnsPath: n.Path()}

	if links := run(t, r, "ip", "-o", "link"); !strings.Contains(links, "xr-only-here") {
		t.Errorf("ip link in the namespace lacks its veth:\n%s", links)
	}
	if links := run(t, dataplane.ExecRunner{}, "ip", "-o", "link"); strings.Contains(links, "xr-only-here") {
		t.Errorf("ip link in the root namespace shows the test veth:\n%s", links)
	}
	if got, err := childNetns(ctx, r); err != nil || got != netnsID(t, n.Path()) {
		t.Errorf("child in %q, %v; want %s", got, err, netnsID(t, n.Path()))
	}
	for _, own := range []dataplane.ExecRunner{{}, {NetnsPath: "/proc/self/ns/net"}} {
		if got, err := childNetns(ctx, own); err != nil || got != ownNetnsID(t) {
			t.Errorf("%+v: child in %q, %v; want the test's own %s", own, got, err, ownNetnsID(t))
		}
	}
	if dataplane.NetnsWorkerLive("/proc/self/ns/net") {
		t.Error("the caller's own namespace got a worker; want a direct start")
	}
	in := []byte("*filter\nCOMMIT\n")
	if out, err := r.Run(ctx, "cat", nil, in); err != nil || !bytes.Equal(out, in) {
		t.Errorf("cat in the namespace: %q, %v; want the stdin back", out, err)
	}
}

// TestPrivilegedExecRunnerConcurrent runs many commands at once for
// several namespaces and the root; each lands in its own.
func TestPrivilegedExecRunnerConcurrent(t *testing.T) {
	ctx := context.Background()
	want := map[string]string{"": ownNetnsID(t)}
	for range 3 {
		n := netnstest.New(t)
		want[n.Path()] = netnsID(t, n.Path())
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for path, id := range want {
		for range 6 {
			wg.Go(func() {
				r := dataplane.ExecRunner{NetnsPath: path}
				for range 8 {
					got, err := childNetns(ctx, r)
					if err != nil {
						errs <- err
					} else if got != id {
						errs <- fmt.Errorf("runner for %q: child in %s, want %s", path, got, id)
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPrivilegedExecRunnerIdleWorkerFreesNamespace: the worker keeps its
// namespace alive while it lives, exits when idle, and then a deleted
// namespace is really freed: the kernel tears it down, which removes the
// peer of a veth that lived in it from a second namespace.
func TestPrivilegedExecRunnerIdleWorkerFreesNamespace(t *testing.T) {
	defer dataplane.SetNetnsWorkerIdle(time.Second)()
	a, b := netnstest.New(t), netnstest.New(t)
	addVeth(t, a, "idle-a", "idle-b")
	if err := a.Do(func(ns.NetNS) error {
		peer, err := netlink.LinkByName("idle-b")
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(peer, int(b.Fd()))
	}); err != nil {
		t.Fatal(err)
	}
	path, id := a.Path(), netnsID(t, a.Path())
	rb := dataplane.ExecRunner{NetnsPath: b.Path()}
	run(t, dataplane.ExecRunner{NetnsPath: path}, "true")
	if !dataplane.NetnsWorkerLive(path) {
		t.Fatal("no worker after a run")
	}
	// Drop the test's own references: the worker's thread is the last one.
	_ = a.Close()
	if err := testutils.UnmountNS(a); err != nil {
		t.Fatal(err)
	}
	if n := threadsIn(t, id); n != 1 {
		t.Fatalf("%d threads in %s while its worker lives, want 1", n, id)
	}
	run(t, rb, "ip", "link", "show", "idle-b") // still there: the worker holds a

	waitUntil(t, 10*time.Second, "the worker to exit", func() bool {
		return !dataplane.NetnsWorkerLive(path) && threadsIn(t, id) == 0
	})
	waitUntil(t, 30*time.Second, "the kernel to free the namespace (veth peer gone)", func() bool {
		_, err := rb.Run(context.Background(), "ip", []string{"link", "show", "idle-b"}, nil)
		return err != nil && strings.Contains(err.Error(), "does not exist")
	})
	if _, err := (dataplane.ExecRunner{NetnsPath: path}).Run(context.Background(), "true", nil, nil); err == nil ||
		!strings.Contains(err.Error(), path) {
		t.Errorf("run in the deleted namespace: %v; want an error naming %s", err, path)
	}
}

// threadsIn counts the test process's threads in the namespace id.
func threadsIn(t *testing.T, id string) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		if got, err := os.Readlink(task); err == nil && got == id {
			n++
		}
	}
	return n
}

func waitUntil(t *testing.T, limit time.Duration, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPrivilegedExecRunnerBadPath: a path that is missing or is not a
// network namespace gives an error naming it, and the command does not
// run anywhere else instead.
func TestPrivilegedExecRunnerBadPath(t *testing.T) {
	netnstest.RequireRoot(t)
	dir := t.TempDir()
	notNetns := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(notNetns, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing"), notNetns, "/proc/self/ns/uts"} {
		marker := filepath.Join(dir, "ran")
		_, err := dataplane.ExecRunner{NetnsPath: path}.Run(context.Background(), "touch", []string{marker}, nil)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v; want an error naming the path", path, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s: the command ran although the namespace could not be entered", path)
		}
		if dataplane.NetnsWorkerLive(path) {
			t.Errorf("%s: a failed worker stays registered", path)
		}
	}
}

// TestPrivilegedExecRunnerCommandError: a failing command in a namespace
// reports its command line, the namespace and its stderr, and still
// returns its stdout; a cancelled context kills it.
func TestPrivilegedExecRunnerCommandError(t *testing.T) {
	n := netnstest.New(t)
	r := dataplane.ExecRunner{NetnsPath: n.Path()}
	_, err := r.Run(context.Background(), "ip", []string{"link", "show", "no-such-dev"}, nil)
	if err == nil {
		t.Fatal("want an error for a missing device")
	}
	for _, want := range []string{"ip link show no-such-dev", n.Path(), "does not exist"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	out, err := r.Run(context.Background(), "sh", []string{"-c", "echo out; echo boom >&2; exit 3"}, nil)
	if err == nil || !strings.Contains(err.Error(), "boom") || string(out) != "out\n" {
		t.Errorf("got %q, %v; want stdout out and an error with boom", out, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.Run(ctx, "sleep", []string{"30"}, nil); err == nil {
		t.Error("want an error from a command whose context ended")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancelled command took %v", d)
	}
	if _, err := r.Run(ctx, "true", nil, nil); err == nil {
		t.Error("want an error when the context has already ended")
	}
}

// TestPrivilegedExecRunnerLeavesMainThread: a worker that starts on the
// process's main thread (which Go never destroys) moves to another one
// and still runs commands in its namespace.
func TestPrivilegedExecRunnerLeavesMainThread(t *testing.T) {
	n := netnstest.New(t)
	var calls atomic.Int32
	restore := dataplane.SetNetnsWorkerOnMainThread(func() bool { return calls.Add(1) == 1 })
	got, err := childNetns(context.Background(), dataplane.ExecRunner{NetnsPath: n.Path()})
	restore()
	if err != nil || got != netnsID(t, n.Path()) {
		t.Fatalf("child in %q, %v; want %s", got, err, netnsID(t, n.Path()))
	}
	if c := calls.Load(); c != 2 {
		t.Errorf("main-thread check ran %d times, want 2 (one hand-over)", c)
	}
}

// nsenterRun is the runner ExecRunner used to be: one extra exec of
// nsenter(1) per command. Kept here only for the comparison below.
func nsenterRun(ctx context.Context, path, name string, args []string, stdin []byte) error {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + path, "--", name}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// BenchmarkPrivilegedExecRunner compares the cost of an empty
// iptables-nft-restore transaction started by ExecRunner's namespace
// worker with the same through nsenter.
func BenchmarkPrivilegedExecRunner(b *testing.B) {
	ctx := context.Background()
	in := []byte("*filter\nCOMMIT\n")
	args := []string{"--noflush"}
	b.Run("setns-worker", func(b *testing.B) {
		n := netnstest.New(b)
		r := dataplane.ExecRunner{NetnsPath: n.Path()}
		for b.Loop() {
			if _, err := r.Run(ctx, "iptables-nft-restore", args, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nsenter", func(b *testing.B) {
		n := netnstest.New(b)
		for b.Loop() {
			if err := nsenterRun(ctx, n.Path(), "iptables-nft-restore", args, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// offMainThread runs f in a new goroutine locked to a thread other than
// the process's main thread, and never unlocked (the thread ends with
// f). Go parks rather than ends a main thread whose locked goroutine
// exits, so a namespace change there would stay: /proc/self/ns/net, which
// names the main thread's namespace, would then differ from the
// process's, and later tests would see the wrong "own" namespace.
func offMainThread(f func()) {
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with f
		if unix.Gettid() == unix.Getpid() {
			// On the main thread: start again elsewhere (no goroutine can
			// land on this thread while it is locked to us), then give
			// this thread back unchanged.
			done := make(chan struct{})
			go func() { defer close(done); offMainThreadLocked(f) }()
			<-done
			runtime.UnlockOSThread()
			return
		}
		f()
	}()
}

func offMainThreadLocked(f func()) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		panic("a second goroutine on the locked main thread")
	}
	f()
}
