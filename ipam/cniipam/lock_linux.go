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
	if path == "" {
		return func() {}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return func() {}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return func() {}
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) || ctx.Err() != nil {
			f.Close()
			return func() {}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lockWait bounds waiting for the host lock; after it the process goes
// ahead unlocked (the datastore's compare-and-swap keeps it correct).
const lockWait = 10 * time.Second
