//go:build privileged

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/dataplane"
)

// dataplaneModes are the dataplanes the policy tests run in, as
// nftablesMode Disabled and Enabled select them: the same calculation
// and rendering, programmed as iptables + ipsets or as nftables, must
// give the same outcome for every packet.
var dataplaneModes = []string{"iptables", "nftables"}

// forEachMode runs f once per dataplane mode, as subtests named after it.
func forEachMode(t *testing.T, f func(t *testing.T, mode string)) {
	for _, mode := range dataplaneModes {
		t.Run(mode, func(t *testing.T) { f(t, mode) })
	}
}

// nftablesModeOf is the nftablesMode that selects mode.
func nftablesModeOf(mode string) string {
	if mode == "nftables" {
		return "Enabled"
	}
	return "Disabled"
}

// newModeDataplane is dataplane.New(cfg) in mode for the namespace at
// netnsPath. In nftables mode it checks, when the test ends, that the
// packets were decided by nftables alone: no felix chain in iptables and
// no felix ipset.
func newModeDataplane(t *testing.T, mode, netnsPath string, cfg dataplane.Config) *dataplane.Dataplane {
	t.Helper()
	if mode == "nftables" {
		cfg.NFTables = dataplane.NewNftDialer(netnsPath)
		t.Cleanup(func() { assertNoIptablesState(t, netnsPath) })
	}
	return dataplane.New(cfg)
}

// assertNoIptablesState fails t if the namespace holds any felix
// iptables chain or ipset.
func assertNoIptablesState(t *testing.T, netnsPath string) {
	run := dataplane.ExecRunner{NetnsPath: netnsPath}
	for _, bin := range []string{"iptables-save", "ip6tables-save"} {
		out, err := run.Run(context.Background(), bin, nil, nil)
		if err != nil {
			t.Errorf("%s: %v", bin, err)
			continue
		}
		if strings.Contains(string(out), "cali-") {
			t.Errorf("nftables mode left iptables rules (%s):\n%s", bin, out)
		}
	}
	if out, err := run.Run(context.Background(), "ipset", []string{"list", "-n"}, nil); err == nil && strings.Contains(string(out), "cali") {
		t.Errorf("nftables mode left ipsets: %s", out)
	}
}
