//go:build privileged

package dataplane_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/netnstest"
)

func run(t *testing.T, r dataplane.Runner, name string, args ...string) string {
	t.Helper()
	out, err := r.Run(context.Background(), name, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestPrivilegedApplyRepairAndCoexist programs the scenario into a fresh
// namespace with the real binaries, checks it with iptables-save and ipset,
// breaks it by hand and watches the refresh repair it, all while a chain
// felix does not own survives untouched.
func TestPrivilegedApplyRepairAndCoexist(t *testing.T) {
	n := netnstest.New(t)
	r := dataplane.ExecRunner{NetnsPath: n.Path()}
	run(t, r, "iptables", "-N", "MINE")
	run(t, r, "iptables", "-A", "MINE", "-s", "192.0.2.1", "-j", "DROP")
	run(t, r, "iptables", "-A", "FORWARD", "-j", "MINE")

	dp := dataplane.New(dataplane.Config{
		Runner: r, V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		RefreshInterval: 200 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	want := render(ct.Scenario())
	dp.SetDesired(want...)
	start := time.Now()
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("first sync of the scenario (v4+v6) took %v", time.Since(start))

	check := func() string {
		save := run(t, r, "iptables-save", "-t", "filter")
		for _, c := range want[0].Chains {
			for _, h := range c.Hashed() {
				if !strings.Contains(save, "cali:"+h.Hash) {
					return "missing rule " + h.Hash + " of " + c.Name
				}
			}
		}
		if strings.Count(save, "-j cali-FORWARD") != 1 {
			return "want one FORWARD hook"
		}
		if !strings.Contains(save, "-A MINE -s 192.0.2.1/32 -j DROP") || !strings.Contains(save, "-A FORWARD -j MINE") {
			return "foreign chain or its jump changed"
		}
		sets := run(t, r, "ipset", "save")
		for _, rs := range want {
			for _, s := range rs.IPSets {
				for m := range s.Members.All() {
					if strings.Contains(m, ":") {
						m = strings.TrimSuffix(m, "/128")
					} else {
						m = strings.TrimSuffix(m, "/32")
					}
					if !strings.Contains(sets, "add "+s.Name+" "+m+"\n") {
						return "set " + s.Name + " lacks " + m
					}
				}
			}
		}
		v6 := run(t, r, "ip6tables-save", "-t", "filter")
		if strings.Count(v6, "-j cali-FORWARD") != 1 {
			return "want one v6 FORWARD hook"
		}
		return ""
	}
	if msg := check(); msg != "" {
		t.Fatal(msg)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dp.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Drift: delete a rule of an endpoint chain, the FORWARD hook, and a
	// selector-set member.
	run(t, r, "iptables", "-D", "cali-tw-cali1111", "1")
	save := run(t, r, "iptables-save", "-t", "filter")
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "-A FORWARD") && strings.Contains(l, "cali-FORWARD") {
			run(t, r, "sh", "-c", "iptables "+strings.Replace(l, "-A", "-D", 1))
		}
	}
	run(t, r, "ipset", "del", "cali40s:cm_v-Okjc9rRdD67JSxbvfY", "10.65.0.3")
	if check() == "" {
		t.Fatal("drift was not applied")
	}
	deadline := time.Now().Add(5 * time.Second)
	for msg := check(); msg != ""; msg = check() {
		if time.Now().After(deadline) {
			t.Fatalf("drift not repaired within 5s: %s", msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPrivilegedBackendDetection: an empty namespace is nft; one where
// something already programmed iptables-legacy is legacy.
func TestPrivilegedBackendDetection(t *testing.T) {
	n := netnstest.New(t)
	r := dataplane.ExecRunner{NetnsPath: n.Path()}
	ctx := context.Background()
	v4, _, err := dataplane.BackendsFor(ctx, r, "Auto")
	if err != nil || v4 != dataplane.BackendNFTV4 {
		t.Fatalf("empty namespace: %v, %v; want nft", v4, err)
	}
	run(t, r, "iptables-legacy", "-A", "FORWARD", "-j", "ACCEPT")
	v4, v6, err := dataplane.BackendsFor(ctx, r, "auto")
	if err != nil || v4 != dataplane.BackendLegacyV4 || v6 != dataplane.BackendLegacyV6 {
		t.Fatalf("with a legacy rule: %v %v, %v; want legacy", v4, v6, err)
	}
	if _, _, err := dataplane.BackendsFor(ctx, r, "bpf"); err == nil {
		t.Error("want an error for an unknown mode")
	}
}

// TestPrivilegedLegacyBackend programs the scenario through
// iptables-legacy and checks it landed there.
func TestPrivilegedLegacyBackend(t *testing.T) {
	n := netnstest.New(t)
	r := dataplane.ExecRunner{NetnsPath: n.Path()}
	dp := dataplane.New(dataplane.Config{Runner: r, V4: dataplane.BackendLegacyV4, V6: dataplane.BackendLegacyV6,
		Logger: slog.New(slog.DiscardHandler)})
	want := render(ct.Scenario())
	dp.SetDesired(want...)
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	save := run(t, r, "iptables-legacy-save", "-t", "filter")
	for _, c := range want[0].Chains {
		if !strings.Contains(save, ":"+c.Name+" ") {
			t.Errorf("chain %s missing from the legacy table", c.Name)
		}
	}
	// A second apply with nothing changed reads nothing and writes nothing.
	res, err := dp.Apply(context.Background())
	if err != nil || res.V4.Restores != 0 {
		t.Errorf("second apply: %v, %v; want no restore", res, err)
	}
}
