package startup

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load(envOf("NODENAME", "n1", "CALICO_NODENAME_FILE", filepath.Join(t.TempDir(), "nodename")), "host", true)
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeName != "n1" || c.Backend != BackendBIRD || len(c.Pools) != 2 {
		t.Fatalf("config %+v", c)
	}
	v4, v6 := c.Pools[0], c.Pools[1]
	if v4.Name != "default-ipv4-ippool" || v4.Spec.CIDR != "192.168.0.0/16" || v4.Spec.BlockSize != 26 || !v4.Spec.NATOutgoing ||
		v4.Spec.IPIPMode != v3.IPIPModeNever || v4.Spec.VXLANMode != v3.VXLANModeNever {
		t.Errorf("default IPv4 pool %+v", v4.Spec)
	}
	p6 := netip.MustParsePrefix(v6.Spec.CIDR)
	if v6.Name != "default-ipv6-ippool" || p6.Bits() != 48 || p6.Addr().As16()[0] != 0xfd || v6.Spec.BlockSize != 122 || v6.Spec.NATOutgoing {
		t.Errorf("default IPv6 pool %+v", v6.Spec)
	}
	if c, _ := Load(envOf("NODENAME", "n1"), "host", false); len(c.Pools) != 1 {
		t.Errorf("IPv6 unsupported: pools %v", c.Pools)
	}
}

func TestLoadPools(t *testing.T) {
	c, err := Load(envOf("NODENAME", "n1", "CALICO_IPV4POOL_CIDR", "10.1.0.0/16", "CALICO_IPV4POOL_IPIP", "cross-subnet",
		"CALICO_IPV4POOL_VXLAN", "off", "CALICO_IPV4POOL_BLOCK_SIZE", "24", "CALICO_IPV4POOL_NAT_OUTGOING", "no",
		"CALICO_IPV4POOL_NODE_SELECTOR", "zone == 'a'", "CALICO_IPV6POOL_CIDR", "fd00:1::/64", "CALICO_IPV6POOL_VXLAN", "Always",
		"CALICO_IPV6POOL_NAT_OUTGOING", "true"), "", true)
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := c.Pools[0].Spec, c.Pools[1].Spec
	if v4.CIDR != "10.1.0.0/16" || v4.IPIPMode != v3.IPIPModeCrossSubnet || v4.BlockSize != 24 || v4.NATOutgoing || v4.NodeSelector != "zone == 'a'" {
		t.Errorf("IPv4 pool %+v", v4)
	}
	if v6.CIDR != "fd00:1::/64" || v6.VXLANMode != v3.VXLANModeAlways || !v6.NATOutgoing || v6.BlockSize != 122 {
		t.Errorf("IPv6 pool %+v", v6)
	}
	if c, err := Load(envOf("NODENAME", "n1", "NO_DEFAULT_POOLS", "true"), "", true); err != nil || len(c.Pools) != 0 {
		t.Errorf("NO_DEFAULT_POOLS: %v, %v", c.Pools, err)
	}
	if c, err := Load(envOf("NODENAME", "n1", "CALICO_IPV4POOL_CIDR", "none", "CALICO_IPV6POOL_CIDR", "none"), "", true); err != nil || len(c.Pools) != 0 {
		t.Errorf("CIDRs none: %v, %v", c.Pools, err)
	}
}

// TestLoadRefusesBadInput: every bad value is refused, naming its
// variable.
func TestLoadRefusesBadInput(t *testing.T) {
	for _, kv := range [][]string{
		{"CALICO_NETWORKING_BACKEND", "gobgp"},
		{"IP", "10.0.0.300"},
		{"IP", "fd00::1"},
		{"IP6", "10.0.0.1"},
		{"AS", "sixty"},
		{"CALICO_IPV4POOL_CIDR", "10.0.0.0/33"},
		{"CALICO_IPV4POOL_CIDR", "fd00::/64"},
		{"CALICO_IPV4POOL_IPIP", "sometimes"},
		{"CALICO_IPV4POOL_VXLAN", "sometimes"},
		{"CALICO_IPV4POOL_BLOCK_SIZE", "19"},
		{"CALICO_IPV6POOL_BLOCK_SIZE", "64"},
		{"CALICO_IPV4POOL_NODE_SELECTOR", "a =="},
		{"NO_DEFAULT_POOLS", "true", "CALICO_IPV4POOL_CIDR", "10.0.0.0/16"},
	} {
		_, err := Load(envOf(append([]string{"NODENAME", "n1"}, kv...)...), "", true)
		if err == nil || !strings.Contains(err.Error(), kv[len(kv)-2]) && !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%v: error %v does not name the variable", kv, err)
		}
	}
}

func TestNodeNamePrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "nodename")
	if c, _ := Load(envOf("HOSTNAME", "Box1", "CALICO_NODENAME_FILE", file), "other", false); c.NodeName != "box1" {
		t.Errorf("HOSTNAME: %q", c.NodeName)
	}
	if err := os.WriteFile(file, []byte("stored\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, _ := Load(envOf("HOSTNAME", "box1", "CALICO_NODENAME_FILE", file), "other", false); c.NodeName != "stored" {
		t.Errorf("nodename file: %q", c.NodeName)
	}
	if c, _ := Load(envOf("NODENAME", "explicit", "CALICO_NODENAME_FILE", file), "other", false); c.NodeName != "explicit" {
		t.Errorf("NODENAME: %q", c.NodeName)
	}
}

func TestMergeTypes(t *testing.T) {
	for _, tc := range [][3]string{{"", "k8s,bgp", "k8s,bgp"}, {"k8s,bgp", "k8s,kdd", "k8s,bgp,kdd"}, {"a", "", "a"}} {
		if got := mergeTypes(tc[0], tc[1]); got != tc[2] {
			t.Errorf("mergeTypes(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}
