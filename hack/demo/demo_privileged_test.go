//go:build privileged

package main

import (
	"testing"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedDemo keeps the README's run command working: the whole
// demo (etcd, CNI, felix, a policy on real traffic, cleanup) must succeed.
func TestPrivilegedDemo(t *testing.T) {
	netnstest.RequireRoot(t)
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
