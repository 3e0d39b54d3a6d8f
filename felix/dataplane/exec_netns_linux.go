package dataplane

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Starting a command inside a network namespace without nsenter.
//
// A network namespace belongs to an OS thread, and a child forked by Go's
// os/exec is cloned from the thread that calls Start, so it inherits that
// thread's namespace (TestPrivilegedForkInheritsThreadNetns checks this
// rather than trusting it). Each namespace path therefore gets one worker:
// a goroutine locked to its own thread for good, which enters the
// namespace once (setns) and then only calls cmd.Start for the commands
// sent to it (or opens a netlink socket, which stays in the namespace it
// was opened in: ipset_members_linux.go). Waiting and output collection
// stay with the caller.
//
// The thread is never unlocked: when the worker's goroutine returns, Go
// destroys the locked thread with it, so no other goroutine ever runs in
// the namespace, and the thread's reference to the namespace goes away.
// Go 1.10+ also never clones new runtime threads from a locked thread.
// A worker that had no work for a while (nsWorkers.idle) returns, so that
// a deleted namespace is really freed; the next Run for the path starts a
// new one.

// nsWorkers is the registry of live workers, one per namespace path, and
// the settings new workers take (variables so that tests can change them).
var nsWorkers = struct {
	sync.Mutex
	byPath map[string]*nsWorker
	// idle is how long a worker waits for work before it exits.
	idle time.Duration
	// onMainThread reports whether the calling goroutine runs on the
	// process's main thread.
	onMainThread func() bool
}{
	byPath:       map[string]*nsWorker{},
	idle:         2 * time.Second,
	onMainThread: func() bool { return unix.Gettid() == unix.Getpid() },
}

// nsWorker is the goroutine and thread that starts commands for one
// namespace path.
type nsWorker struct {
	path         string
	idle         time.Duration
	onMainThread func() bool
	starts       chan startRequest
	ready        chan struct{} // closed once the thread is in the namespace, or failed to enter it
	err          error         // why entering failed; written before ready is closed
	ns           nsID          // the namespace entered; written before ready is closed

	// users counts the Runs holding this worker (guarded by nsWorkers):
	// it retires only when none do, so a Run never sends to a worker
	// that has gone.
	users int
}

// startRequest is one short call (cmd.Start, a socket's creation) to
// make on the worker's thread.
type startRequest struct {
	fn   func() error
	done chan error
}

// startInNetns starts cmd with its child in the network namespace at path.
func startInNetns(ctx context.Context, path string, cmd *exec.Cmd) error {
	return runInNetns(ctx, path, cmd.Start)
}

// runInNetns calls fn on a thread in the network namespace at path. fn
// must be short and must not change the thread's state (it is the
// worker's, and serves every later call for path).
//
// A path may come to name another namespace (a /proc/<pid>/ns/net of a
// reused pid, a name deleted and created again) while a worker entered
// the one it named before: such a worker is replaced, so that fn never
// runs in a namespace the path no longer names.
func runInNetns(ctx context.Context, path string, fn func() error) error {
	for range 3 {
		w := acquireNsWorker(path)
		err := w.call(ctx, path, fn)
		releaseNsWorker(w)
		if !errors.Is(err, errWorkerStale) {
			return err
		}
	}
	return fmt.Errorf("network namespace %s: keeps changing", path)
}

// errWorkerStale says a worker's namespace is no longer the one its path
// names.
var errWorkerStale = errors.New("namespace worker is for a namespace the path no longer names")

// call runs fn on w's thread, unless w's namespace is no longer path's.
func (w *nsWorker) call(ctx context.Context, path string, fn func() error) error {
	select {
	case <-w.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	if w.err != nil {
		return w.err
	}
	if id, err := namespaceOf(path); err != nil {
		return err
	} else if id != w.ns {
		w.forget()
		return errWorkerStale
	}
	req := startRequest{fn: fn, done: make(chan error, 1)}
	select {
	case w.starts <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-req.done
}

// acquireNsWorker returns the live worker for path, starting one if there
// is none, and counts the caller as its user.
func acquireNsWorker(path string) *nsWorker {
	nsWorkers.Lock()
	defer nsWorkers.Unlock()
	w := nsWorkers.byPath[path]
	if w == nil {
		w = &nsWorker{path: path, idle: nsWorkers.idle, onMainThread: nsWorkers.onMainThread,
			starts: make(chan startRequest), ready: make(chan struct{})}
		nsWorkers.byPath[path] = w
		go w.run(nil)
	}
	w.users++
	return w
}

func releaseNsWorker(w *nsWorker) {
	nsWorkers.Lock()
	w.users--
	nsWorkers.Unlock()
}

// run is the worker's goroutine. handedOver, when set, is closed once this
// goroutine has its own locked thread.
func (w *nsWorker) run(handedOver chan<- struct{}) {
	runtime.LockOSThread() // never unlocked; see the comment at the top
	if handedOver != nil {
		close(handedOver)
	}
	if w.onMainThread() {
		// Go does not end the main thread when a goroutine locked to it
		// exits (it parks it forever), so a worker here would keep its
		// namespace alive for good. Hand over to a new goroutine, which
		// cannot land on this thread while it is locked to us; this
		// thread has not changed namespace, so unlocking it is safe.
		moved := make(chan struct{})
		go w.run(moved)
		<-moved
		runtime.UnlockOSThread()
		return
	}
	id, err := enterNetns(w.path)
	if err != nil {
		w.forget()
		w.err = err
		close(w.ready)
		return
	}
	w.ns = id
	close(w.ready)

	idle := time.NewTimer(w.idle)
	defer idle.Stop()
	for {
		select {
		case req := <-w.starts:
			req.done <- req.fn()
			idle.Reset(w.idle)
		case <-idle.C:
			if w.retireIfUnused() {
				return
			}
			idle.Reset(w.idle)
		}
	}
}

// retireIfUnused removes the worker from the registry unless some Run
// still holds it, and reports whether it did.
func (w *nsWorker) retireIfUnused() bool {
	nsWorkers.Lock()
	defer nsWorkers.Unlock()
	if w.users > 0 {
		return false
	}
	if nsWorkers.byPath[w.path] == w {
		delete(nsWorkers.byPath, w.path)
	}
	return true
}

// forget removes a worker that failed to enter its namespace, or whose
// namespace the path no longer names, so that the next Run tries again
// with a new one; the Runs holding it get its error.
func (w *nsWorker) forget() {
	nsWorkers.Lock()
	defer nsWorkers.Unlock()
	if nsWorkers.byPath[w.path] == w {
		delete(nsWorkers.byPath, w.path)
	}
}

// enterNetns moves the calling thread into the network namespace at path
// and returns that namespace's identity.
func enterNetns(path string) (nsID, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nsID{}, fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nsID{}, fmt.Errorf("network namespace %s: %w", path, err)
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return nsID{}, fmt.Errorf("entering network namespace %s (setns): %w", path, err)
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}

// nsID identifies a namespace (its nsfs inode).
type nsID struct{ dev, ino uint64 }

// namespaceOf is the identity of the namespace at path.
func namespaceOf(path string) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}

// inCallersNetns reports whether path names the network namespace of the
// calling thread, so that a child forked right here would already be in it.
// An unlocked goroutine may move to another thread before it forks, but
// every thread not locked by a goroutine is in the process's namespace.
func inCallersNetns(path string) (bool, error) {
	var target, self unix.Stat_t
	if err := unix.Stat(path, &target); err != nil {
		return false, fmt.Errorf("network namespace %s: %w", path, err)
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
		return false, nil // cannot tell; the worker is always right
	}
	return target.Dev == self.Dev && target.Ino == self.Ino, nil
}
