package dataplane

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// TestRecoverPanic: the unchecked type assertion in netlink's
// ipsetExecute (a non-Errno failure) becomes an error, not a crash.
func TestRecoverPanic(t *testing.T) {
	notErrno := errors.New("Wrong sender portid 1, expected 0")
	err := recoverPanic(func() error {
		_ = int(notErrno.(syscall.Errno)) // what ipsetExecute does
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "netlink ipset request failed") {
		t.Fatalf("got %v, want an error", err)
	}
	want := errors.New("plain")
	if err := recoverPanic(func() error { return want }); err != want {
		t.Fatalf("got %v, want the function's own error", err)
	}
}
