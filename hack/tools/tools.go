//go:build tools

// Package tools pins the reference CNI plugins the tests build and run:
// portmap (chained after calico in the e2e tests) and ptp + host-local
// (the baseline of the CNI benchmark), all from containernetworking/plugins.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/ptp"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
