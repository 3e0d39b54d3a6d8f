//go:build privileged

package e2e

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables"

	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// dataplaneModes are the dataplanes the policy tests run in, as
// nftablesMode Disabled and Enabled select them: the same calculation
// and rendering, programmed as iptables + ipsets or as nftables, must
// give the same outcome for every packet.
var dataplaneModes = []string{"iptables", "nftables"}

// benchEachMode runs f once per dataplane mode, as sub-benchmarks named
// after it, so that one run reports both side by side.
func benchEachMode(b *testing.B, f func(b *testing.B, mode string)) {
	for _, mode := range dataplaneModes {
		b.Run(mode, func(b *testing.B) { f(b, mode) })
	}
}

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
func newModeDataplane(t testing.TB, mode, netnsPath string, cfg dataplane.Config) *dataplane.Dataplane {
	t.Helper()
	if mode == "nftables" {
		cfg.NFTables = dataplane.NewNftDialer(netnsPath)
		t.Cleanup(func() {
			assertNoIptablesState(t, netnsPath)
			if t.Failed() {
				out, _ := dataplane.ExecRunner{NetnsPath: netnsPath}.Run(context.Background(), "nft", []string{"list", "ruleset"}, nil)
				t.Logf("the failed test's nftables ruleset:\n%s", out)
			}
		})
	}
	return dataplane.New(cfg)
}

// assertNoIptablesState fails t if the namespace holds any felix
// iptables chain or ipset.
func assertNoIptablesState(t testing.TB, netnsPath string) {
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

// nftSetHolding returns a selector set (cali40s-) of felix's nftables table holding
// ip (as a single-address element).
func nftSetHolding(tb testing.TB, run dataplane.Runner, ip string) string {
	out, err := run.Run(context.Background(), "nft", []string{"list", "table", "ip", rules.NftTable}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	set := ""
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if name, ok := strings.CutPrefix(l, "set "); ok {
			set = strings.TrimSuffix(name, " {")
		}
		if strings.HasPrefix(set, "cali40s-") && slices.Contains(strings.FieldsFunc(l, func(r rune) bool { return r == ' ' || r == ',' || r == '{' || r == '}' }), ip) {
			return set
		}
	}
	tb.Fatalf("no nftables set holds %s:\n%s", ip, out)
	return ""
}

// nftSetHas says whether set (of felix's ip table) has ip as an element,
// read through a netlink socket in the runner's namespace (one per
// namespace, kept until the test ends: a probe every millisecond then
// costs a dump of the set, not a new socket).
func nftSetHas(tb testing.TB, run dataplane.Runner, set, ip string) (bool, error) {
	er, ok := run.(dataplane.ExecRunner)
	if !ok {
		tb.Fatalf("nftSetHas needs an ExecRunner, not %T", run)
	}
	conn, err := nftProbe(tb, er.NetnsPath)
	if err != nil {
		return false, err
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: rules.NftTable}
	s, err := conn.GetSetByName(table, set)
	if err != nil {
		return false, err
	}
	elems, err := conn.GetSetElements(s)
	if err != nil {
		return false, err
	}
	want := net.ParseIP(ip).To4()
	for _, e := range elems {
		if !e.IntervalEnd && net.IP(e.Key).Equal(want) {
			return true, nil
		}
	}
	return false, nil
}

// nftProbes are the member probes' nftables connections, one per
// namespace path, each opened on its first probe and closed when the
// test or benchmark that opened it ends.
var nftProbes = struct {
	sync.Mutex
	byPath map[string]*nftables.Conn
}{byPath: map[string]*nftables.Conn{}}

func nftProbe(tb testing.TB, path string) (*nftables.Conn, error) {
	nftProbes.Lock()
	defer nftProbes.Unlock()
	if c := nftProbes.byPath[path]; c != nil {
		return c, nil
	}
	c, closeConn, err := dataplane.NewNftConn(path)
	if err != nil {
		return nil, err
	}
	nftProbes.byPath[path] = c
	tb.Cleanup(func() {
		nftProbes.Lock()
		defer nftProbes.Unlock()
		delete(nftProbes.byPath, path)
		closeConn()
	})
	return c, nil
}
