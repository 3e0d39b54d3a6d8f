//go:build !linux

package cniipam

import (
	"context"
	"time"
)

func hostLock(context.Context, string) func() { return func() {} }

// HostLock is a no-op off Linux (see lock_linux.go).
func HostLock(context.Context, string, time.Duration) (func(), bool) { return func() {}, false }
