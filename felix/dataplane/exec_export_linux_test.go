package dataplane

import "time"

// Test hooks into ExecRunner's namespace workers.

// SetNetnsWorkerIdle makes workers started from now on exit after d
// without work; the returned func restores the default.
func SetNetnsWorkerIdle(d time.Duration) (restore func()) {
	nsWorkers.Lock()
	defer nsWorkers.Unlock()
	old := nsWorkers.idle
	nsWorkers.idle = d
	return func() {
		nsWorkers.Lock()
		defer nsWorkers.Unlock()
		nsWorkers.idle = old
	}
}

// SetNetnsWorkerOnMainThread replaces the main-thread check of workers
// started from now on; the returned func restores the real one.
func SetNetnsWorkerOnMainThread(f func() bool) (restore func()) {
	nsWorkers.Lock()
	defer nsWorkers.Unlock()
	old := nsWorkers.onMainThread
	nsWorkers.onMainThread = f
	return func() {
		nsWorkers.Lock()
		defer nsWorkers.Unlock()
		nsWorkers.onMainThread = old
	}
}

// NetnsWorkerLive reports whether a worker for path is registered.
func NetnsWorkerLive(path string) bool {
	nsWorkers.Lock()
	defer nsWorkers.Unlock()
	return nsWorkers.byPath[path] != nil
}

// LiveNetnsWorkers counts the registered workers.
func LiveNetnsWorkers() int {
	nsWorkers.Lock()
	defer nsWorkers.Unlock()
	return len(nsWorkers.byPath)
}

// SetIPSetHandleIdle makes netlink handles opened from now on close after
// d without use; the returned func restores the default.
func SetIPSetHandleIdle(d time.Duration) (restore func()) {
	ipsetHandles.Lock()
	defer ipsetHandles.Unlock()
	old := ipsetHandles.idle
	ipsetHandles.idle = d
	return func() {
		ipsetHandles.Lock()
		defer ipsetHandles.Unlock()
		ipsetHandles.idle = old
	}
}

// IPSetHandleOpen reports whether a netlink handle for path is registered.
func IPSetHandleOpen(path string) bool {
	ipsetHandles.Lock()
	defer ipsetHandles.Unlock()
	return ipsetHandles.byPath[path] != nil
}

// DropIPSetHandle drops (and, unused, closes) the handle for path.
func DropIPSetHandle(path string) {
	ipsetHandles.Lock()
	defer ipsetHandles.Unlock()
	if h := ipsetHandles.byPath[path]; h != nil {
		h.drop()
	}
}
