package cniipam

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// hostLock takes an exclusive flock on path, polling so that ctx can end
// the wait. The lock only saves concurrent CNI processes on one host from
// losing compare-and-swap races to each other; correctness never depends
// on it (a process that cannot take it in time proceeds without it).
func hostLock(ctx context.Context, path string) (unlock func()) {
	unlock, _ = HostLock(ctx, path, lockWait)
	return unlock
}

// lockWait bounds waiting for the host lock; after it the process goes
// ahead unlocked (the datastore's compare-and-swap keeps it correct).
const lockWait = 10 * time.Second

// HostLock takes an exclusive flock on path (made if missing, with its
// folder), polling so that ctx or the bound wait can end the wait, and
// says whether it had to wait for another holder. An optimisation only:
// when the file cannot be used or the wait runs out it returns a no-op
// unlock. It never blocks opening the file and never follows a link (a
// FIFO or a link placed there must not hang or redirect a CNI call).
func HostLock(ctx context.Context, path string, wait time.Duration) (unlock func(), waited bool) {
	noop := func() {}
	if path == "" {
		return noop, false
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return noop, false
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return noop, false
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return noop, false
	}
	deadline := time.Now().Add(wait)
	for ; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, waited
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return noop, waited
		}
		time.Sleep(time.Millisecond)
	}
}
