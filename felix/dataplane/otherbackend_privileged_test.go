//go:build privileged

package dataplane_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedCleanupOtherBackend: stale felix chains left in the
// iptables backend felix does not use (here legacy, while felix runs on
// nft) still drop packets; CleanupBackend removes them, their hooks
// and nat chains, and keeps everything felix does not own.
func TestPrivilegedCleanupOtherBackend(t *testing.T) {
	n := netnstest.New(t)
	r := dataplane.ExecRunner{NetnsPath: n.Path()}
	run(t, r, "ip", "link", "set", "lo", "up")
	// A stale felix of the other backend: a cali- chain dropping ICMP,
	// hooked into INPUT with felix's comment; a cali- nat chain.
	run(t, r, "iptables-legacy", "-N", "cali-INPUT")
	run(t, r, "iptables-legacy", "-A", "cali-INPUT", "-p", "icmp", "-j", "DROP")
	run(t, r, "iptables-legacy", "-I", "INPUT", "1", "-m", "comment", "--comment", "cali:Cz_u1IQiXIMmKD4c", "-j", "cali-INPUT")
	run(t, r, "iptables-legacy", "-t", "nat", "-N", "cali-nat-outgoing")
	run(t, r, "iptables-legacy", "-t", "nat", "-A", "POSTROUTING", "-j", "cali-nat-outgoing")
	// Someone else's rules in the same backend and in the one felix uses.
	run(t, r, "iptables-legacy", "-N", "OTHER")
	run(t, r, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "--dport", "9", "-j", "OTHER")
	run(t, r, "iptables-nft", "-N", "cali-KEEP")

	if err := netnstest.Ping(n, "127.0.0.1", 1, time.Second); err == nil {
		t.Fatal("the stale legacy chain does not drop ICMP: the test proves nothing")
	}
	chains, rules, err := dataplane.CleanupBackend(context.Background(), r, dataplane.BackendLegacyV4)
	if err != nil {
		t.Fatal(err)
	}
	if chains != 2 || rules != 2 {
		t.Errorf("removed %d chains and %d rules, want 2 and 2", chains, rules)
	}
	if err := netnstest.Ping(n, "127.0.0.1", 2, 3*time.Second); err != nil {
		t.Errorf("ICMP still dropped after the cleanup: %v", err)
	}
	legacy := run(t, r, "iptables-legacy-save") + run(t, r, "iptables-legacy-save", "-t", "nat")
	if strings.Contains(legacy, "cali") {
		t.Errorf("felix's rules left in legacy:\n%s", legacy)
	}
	if !strings.Contains(legacy, "-A INPUT -p tcp -m tcp --dport 9 -j OTHER") || !strings.Contains(legacy, ":OTHER") {
		t.Errorf("rules felix does not own were removed:\n%s", legacy)
	}
	if !strings.Contains(run(t, r, "iptables-nft-save"), ":cali-KEEP") {
		t.Error("the backend felix uses was touched")
	}
	// Nothing left: a second cleanup does nothing.
	if c, r2, err := dataplane.CleanupBackend(context.Background(), r, dataplane.BackendLegacyV4); err != nil || c+r2 != 0 {
		t.Errorf("second cleanup: %d %d %v", c, r2, err)
	}
}

// TestPrivilegedFelixLeftoversSeen: a fresh namespace holds nothing of
// felix's; a cali- chain in any backend, a hook rule's comment or a felix
// ipset is seen (nftables mode then cleans up after its first sync).
func TestPrivilegedFelixLeftoversSeen(t *testing.T) {
	all := []dataplane.Backend{dataplane.BackendNFTV4, dataplane.BackendNFTV6, dataplane.BackendLegacyV4, dataplane.BackendLegacyV6}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make [][]string
	}{
		{"legacy chain", [][]string{{"iptables-legacy", "-N", "cali-INPUT"}}},
		{"nft ip6 chain", [][]string{{"ip6tables-nft", "-t", "raw", "-N", "cali-PREROUTING"}}},
		{"ipset", [][]string{{"ipset", "create", "cali40s:abc", "hash:net"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := netnstest.New(t)
			r := dataplane.ExecRunner{NetnsPath: n.Path()}
			run(t, r, "iptables-nft", "-N", "OTHER") // someone else's
			if dataplane.HasFelixRules(ctx, r, all) || dataplane.HasFelixIPSets(ctx, r) {
				t.Fatal("felix's leftovers seen in a namespace without any")
			}
			for _, argv := range tc.make {
				run(t, r, argv[0], argv[1:]...)
			}
			if !dataplane.HasFelixRules(ctx, r, all) && !dataplane.HasFelixIPSets(ctx, r) {
				t.Errorf("%s: not seen", tc.name)
			}
		})
	}
}
