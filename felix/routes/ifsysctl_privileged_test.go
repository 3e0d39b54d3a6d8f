//go:build privileged

package routes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/infra"
)

// TestPrivilegedWorkloadInterfaceSysctls: felix gives each local
// workload interface Calico's per-interface settings (proxy ARP,
// forwarding, route_localnet, no proxy delay, rp_filter at the
// namespace's default, no router advertisements), also when something
// reset them, and an interface that is not there yet is no error and is
// configured once it appears.
func TestPrivilegedWorkloadInterfaceSysctls(t *testing.T) {
	n, h := driverNS(t)
	dr := NewDriver(h, nil)
	inNS := func(f func() error) error { return n.Do(func(ns.NetNS) error { return f() }) }
	dr.Sysctl = func(key, value string) error {
		return inNS(func() error { return os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644) })
	}
	dr.ReadSysctl = func(key string) (v string, err error) {
		err = inNS(func() error {
			b, err := os.ReadFile(filepath.Join("/proc/sys", key))
			v = string(b)
			return err
		})
		return v, err
	}
	read := func(key string) string {
		t.Helper()
		v, err := dr.ReadSysctl(key)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(v)
	}
	if err := dr.Sysctl("net/ipv4/conf/default/rp_filter", "2"); err != nil {
		t.Fatal(err)
	}
	in := Input{ThisNode: "n0", Cluster: infra.Derive([]*v3.IPPool{ippool("10.70.0.0/16", "Never", "Never")}, threeNodes()), Workloads: []*v3.WorkloadEndpoint{wep("a", "cali12345", "10.70.0.5/32"), wep("b", "calilater", "10.70.0.6/32")}}
	apply := func() {
		t.Helper()
		d, probs := Compute(in)
		if len(probs) != 0 {
			t.Fatal(probs)
		}
		if _, err := dr.Apply(d); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	// Something (a reset, an old CNI) left them off.
	for _, kv := range [][2]string{{"net/ipv4/conf/cali12345/proxy_arp", "0"}, {"net/ipv4/conf/cali12345/forwarding", "0"},
		{"net/ipv6/conf/cali12345/accept_ra", "1"}} {
		if err := dr.Sysctl(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	apply()
	want := map[string]string{
		"net/ipv4/conf/cali12345/proxy_arp":      "1",
		"net/ipv4/conf/cali12345/forwarding":     "1",
		"net/ipv4/conf/cali12345/route_localnet": "1",
		"net/ipv4/conf/cali12345/rp_filter":      "2",
		"net/ipv4/neigh/cali12345/proxy_delay":   "0",
		"net/ipv6/conf/cali12345/accept_ra":      "0",
	}
	check := func(want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got := read(k); got != v {
				t.Errorf("%s = %s, want %s", k, got, v)
			}
		}
	}
	check(want)
	// The second interface appears later (the CNI made it after felix
	// heard of the endpoint): configured at the next Apply.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ipOut(t, n, "link", "add", "calilater", "type", "veth", "peer", "name", "calilater-p")
	must(dr.Sysctl("net/ipv4/conf/calilater/proxy_arp", "0"))
	apply()
	check(map[string]string{"net/ipv4/conf/calilater/proxy_arp": "1", "net/ipv4/conf/calilater/route_localnet": "1"})
}
