//go:build privileged

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

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
// asked of the kernel for that one element (NFT_MSG_GETSETELEM, what `nft
// get element` sends) over a netlink socket in the runner's namespace,
// kept until the test ends: a probe every millisecond then costs one
// lookup, not a dump of a set of 10^5 elements. An interval set (whose
// hosts that get does not find) is dumped instead.
func nftSetHas(tb testing.TB, run dataplane.Runner, set, ip string) (bool, error) {
	er, ok := run.(dataplane.ExecRunner)
	if !ok {
		tb.Fatalf("nftSetHas needs an ExecRunner, not %T", run)
	}
	conn, err := nftProbe(tb, er.NetnsPath)
	if err != nil {
		return false, err
	}
	key := net.ParseIP(ip).To4()
	if key == nil {
		tb.Fatalf("nftSetHas: %q is no IPv4 address", ip)
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.NFTA_SET_ELEM_LIST_TABLE, rules.NftTable)
	ae.String(unix.NFTA_SET_ELEM_LIST_SET, set)
	ae.Nested(unix.NFTA_SET_ELEM_LIST_ELEMENTS, func(ae *netlink.AttributeEncoder) error {
		ae.Nested(unix.NFTA_LIST_ELEM, func(ae *netlink.AttributeEncoder) error {
			ae.Nested(unix.NFTA_SET_ELEM_KEY, func(ae *netlink.AttributeEncoder) error {
				ae.Bytes(unix.NFTA_DATA_VALUE, key)
				return nil
			})
			return nil
		})
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		return false, err
	}
	msg := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETSETELEM),
			Flags: netlink.Request}, // the element or an error comes back
		Data: append([]byte{unix.AF_INET, unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
	_, err = conn.Execute(msg)
	if errors.Is(err, unix.ENOENT) {
		if interval, ierr := nftIntervalSetCached(er.NetnsPath, set); ierr == nil && interval {
			return nftSetDumpHas(er.NetnsPath, set, key)
		}
		return false, nil
	}
	return err == nil, err
}

// nftIntervalSetCached is nftIntervalSet, asked once per namespace and
// set while the probe's socket lives: a probe that waits for an element to
// appear or go must cost one request per poll, as the ipset probe does
// (asking the kernel for the set's type took a socket of its own each
// time, which the scale bench counted as felix's latency).
func nftIntervalSetCached(path, set string) (bool, error) {
	nftProbes.Lock()
	v, ok := nftProbes.interval[path+"/"+set]
	nftProbes.Unlock()
	if ok {
		return v, nil
	}
	v, err := nftIntervalSet(path, set)
	if err == nil {
		nftProbes.Lock()
		if nftProbes.byPath[path] != nil {
			nftProbes.interval[path+"/"+set] = v
		}
		nftProbes.Unlock()
	}
	return v, err
}

// nftIntervalSet says whether set is an interval set (whose hosts the
// kernel's single-element get does not find by their address).
func nftIntervalSet(path, set string) (bool, error) {
	conn, closeConn, err := dataplane.NewNftConn(path)
	if err != nil {
		return false, err
	}
	defer closeConn()
	s, err := conn.GetSetByName(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: rules.NftTable}, set)
	if err != nil {
		return false, err
	}
	return s.Interval, nil
}

// nftSetDumpHas looks for key among a dump of set's elements.
func nftSetDumpHas(path, set string, key net.IP) (bool, error) {
	conn, closeConn, err := dataplane.NewNftConn(path)
	if err != nil {
		return false, err
	}
	defer closeConn()
	s, err := conn.GetSetByName(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: rules.NftTable}, set)
	if err != nil {
		return false, err
	}
	elems, err := conn.GetSetElements(s)
	if err != nil {
		return false, err
	}
	for _, e := range elems {
		if !e.IntervalEnd && net.IP(e.Key).Equal(key) {
			return true, nil
		}
	}
	return false, nil
}

// nftProbes are the member probes' netfilter sockets, one per namespace
// path, each opened on its first probe and closed when the test or
// benchmark that opened it ends.
var nftProbes = struct {
	sync.Mutex
	byPath   map[string]*netlink.Conn
	interval map[string]bool // by path/set (a set keeps its type while the socket lives)
}{byPath: map[string]*netlink.Conn{}, interval: map[string]bool{}}

func nftProbe(tb testing.TB, path string) (*netlink.Conn, error) {
	nftProbes.Lock()
	defer nftProbes.Unlock()
	if c := nftProbes.byPath[path]; c != nil {
		return c, nil
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", path, err)
	}
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd})
	unix.Close(fd) // the socket is made; the file would keep the namespace busy
	if err != nil {
		return nil, fmt.Errorf("netfilter socket in %s: %w", path, err)
	}
	nftProbes.byPath[path] = c
	tb.Cleanup(func() {
		nftProbes.Lock()
		defer nftProbes.Unlock()
		delete(nftProbes.byPath, path)
		maps.DeleteFunc(nftProbes.interval, func(k string, _ bool) bool { return strings.HasPrefix(k, path+"/") })
		_ = c.Close()
	})
	return c, nil
}
