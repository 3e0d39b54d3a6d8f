// Package netnstest gives privileged tests their own network namespaces:
// each is created fresh with a unique name and removed in t.Cleanup, so a
// test never touches the host's own network. Tests that use it carry the
// "privileged" build tag and fail (never skip) when not run as root.
package netnstest

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
)

// RequireRoot fails the test when it is not running as root: privileged
// tests must not pass by skipping.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("privileged test needs root (run as root: make test-privileged)")
	}
}

// New creates a fresh, uniquely named network namespace that is closed and
// removed when the test ends, even if it fails. A namespace that cannot
// be removed then (a handle on its path still open: a leak) fails the
// test.
func New(t testing.TB) ns.NetNS {
	t.Helper()
	RequireRoot(t)
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("creating netns: %v", err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		if _, err := os.Stat(n.Path()); errors.Is(err, fs.ErrNotExist) {
			return // the test removed it itself
		}
		if err := testutils.UnmountNS(n); err != nil {
			t.Errorf("removing netns %s: %v", n.Path(), err)
		}
	})
	return n
}
