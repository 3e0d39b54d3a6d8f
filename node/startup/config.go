package startup

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Calico's defaults for the pools calico-node creates when none exists.
const (
	DefaultIPv4PoolCIDR      = "192.168.0.0/16"
	DefaultIPv4PoolBlockSize = 26
	DefaultIPv6PoolBlockSize = 122
	DefaultIPv4PoolName      = "default-ipv4-ippool"
	DefaultIPv6PoolName      = "default-ipv6-ippool"
	// DefaultNodenameFile is where the node name is written for the CNI
	// plugin (CALICO_NODENAME_FILE overrides it).
	DefaultNodenameFile = "/var/lib/calico/nodename"
)

// Networking backends (CALICO_NETWORKING_BACKEND).
const (
	BackendBIRD  = "bird"
	BackendVXLAN = "vxlan"
	BackendNone  = "none"
)

// Config is calico-node's startup configuration.
type Config struct {
	NodeName string
	// Backend is bird (the default), vxlan or none (policy only: no BGP
	// addresses on the Node, no confd, no BIRD).
	Backend string
	// ClusterType is CLUSTER_TYPE, merged into ClusterInformation.
	ClusterType string
	// IP / IP6 are Calico's: an address (with or without prefix length),
	// "autodetect", "none" or "" (IPv4: autodetect unless the Node has
	// one already; IPv6: none). The methods are IP_AUTODETECTION_METHOD
	// and IP6_AUTODETECTION_METHOD.
	IP, IPMethod, IP6, IP6Method string
	// AS is the node's AS number (AS), nil to use the global one.
	AS *numorstring.ASNumber
	// K8sNodeRef is the Kubernetes node name (CALICO_K8S_NODE_REF),
	// recorded in the Node's orchRefs.
	K8sNodeRef string
	// Pools are the default pools to create when no pool of their IP
	// version exists (none with NO_DEFAULT_POOLS).
	Pools []*v3.IPPool
	// NodenameFile is where the node name is written.
	NodenameFile string
}

// Load reads Calico's environment. hostname is the fallback node name
// (after NODENAME, the node name file and HOSTNAME); ipv6Supported says
// whether a default IPv6 pool may be created (Calico: FELIX_IPV6SUPPORT
// not false and the kernel has IPv6). Every bad value is reported, each
// naming its variable.
func Load(getenv func(string) string, hostname string, ipv6Supported bool) (Config, error) {
	c := Config{
		Backend: strings.ToLower(strings.TrimSpace(getenv("CALICO_NETWORKING_BACKEND"))), ClusterType: getenv("CLUSTER_TYPE"),
		IP: strings.TrimSpace(getenv("IP")), IPMethod: getenv("IP_AUTODETECTION_METHOD"),
		IP6: strings.TrimSpace(getenv("IP6")), IP6Method: getenv("IP6_AUTODETECTION_METHOD"),
		K8sNodeRef: getenv("CALICO_K8S_NODE_REF"), NodenameFile: getenv("CALICO_NODENAME_FILE"),
	}
	var errs []error
	bad := func(k, v, why string) { errs = append(errs, fmt.Errorf("%s=%q: %s", k, v, why)) }
	if c.NodenameFile == "" {
		c.NodenameFile = DefaultNodenameFile
	}
	c.NodeName = nodeName(getenv, c.NodenameFile, hostname)
	if c.NodeName == "" {
		errs = append(errs, errors.New("no node name: set NODENAME"))
	}
	switch c.Backend {
	case "":
		c.Backend = BackendBIRD
	case BackendBIRD, BackendVXLAN, BackendNone:
	default:
		bad("CALICO_NETWORKING_BACKEND", c.Backend, "use bird, vxlan or none")
	}
	for _, ip := range []struct {
		key, val string
		version  int
	}{{"IP", c.IP, 4}, {"IP6", c.IP6, 6}} {
		switch ip.val {
		case "", "autodetect", "none":
			continue
		}
		if err := checkAddr(ip.val, ip.version); err != nil {
			bad(ip.key, ip.val, err.Error())
		}
	}
	if v := getenv("AS"); v != "" {
		as, err := numorstring.ASNumberFromString(v)
		if err != nil {
			bad("AS", v, "not an AS number")
		} else {
			c.AS = &as
		}
	}
	pools, err := defaultPools(getenv, ipv6Supported)
	if err != nil {
		errs = append(errs, err)
	}
	c.Pools = pools
	if len(errs) > 0 {
		return c, fmt.Errorf("calico-node configuration: %w", errors.Join(errs...))
	}
	return c, nil
}

// nodeName follows Calico's precedence: NODENAME, the node name file,
// HOSTNAME (lower case), the host name (lower case).
func nodeName(getenv func(string) string, file, hostname string) string {
	if n := strings.TrimSpace(getenv("NODENAME")); n != "" {
		return n
	}
	if data, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(data)) != "" {
		return strings.TrimSpace(string(data))
	}
	if n := strings.ToLower(strings.TrimSpace(getenv("HOSTNAME"))); n != "" {
		return n
	}
	return strings.ToLower(strings.TrimSpace(hostname))
}

// checkAddr accepts an address or an address with prefix length of the
// version, as Calico's IP and IP6.
func checkAddr(s string, version int) error {
	var a netip.Addr
	if p, err := netip.ParsePrefix(s); err == nil {
		a = p.Addr()
	} else if a, err = netip.ParseAddr(s); err != nil {
		return fmt.Errorf("not an IPv%d address or CIDR", version)
	}
	if a.Is4() != (version == 4) {
		return fmt.Errorf("not an IPv%d address", version)
	}
	return nil
}

// defaultPools builds the default pools from CALICO_IPV4POOL_* and
// CALICO_IPV6POOL_*, with Calico's defaults: IPv4 192.168.0.0/16, /26
// blocks, NAT outgoing; IPv6 a random ULA /48, /122 blocks, no NAT (only
// when IPv6 is supported). A CIDR "none" skips that version;
// NO_DEFAULT_POOLS=true skips both and conflicts with a CIDR set.
func defaultPools(getenv func(string) string, ipv6Supported bool) ([]*v3.IPPool, error) {
	v4CIDR, v6CIDR := getenv("CALICO_IPV4POOL_CIDR"), getenv("CALICO_IPV6POOL_CIDR")
	if strings.EqualFold(getenv("NO_DEFAULT_POOLS"), "true") {
		if v4CIDR != "" || v6CIDR != "" {
			return nil, errors.New("NO_DEFAULT_POOLS=true conflicts with CALICO_IPV4POOL_CIDR / CALICO_IPV6POOL_CIDR")
		}
		return nil, nil
	}
	var (
		out  []*v3.IPPool
		errs []error
	)
	if v4CIDR != "none" {
		if v4CIDR == "" {
			v4CIDR = DefaultIPv4PoolCIDR
		}
		p, err := pool(getenv, 4, DefaultIPv4PoolName, v4CIDR, DefaultIPv4PoolBlockSize, true)
		errs = append(errs, err)
		out = append(out, p)
	}
	if v6CIDR != "none" && ipv6Supported {
		if v6CIDR == "" {
			v6CIDR = randomULA()
		}
		p, err := pool(getenv, 6, DefaultIPv6PoolName, v6CIDR, DefaultIPv6PoolBlockSize, false)
		errs = append(errs, err)
		out = append(out, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

func pool(getenv func(string) string, v int, name, cidr string, blockSize int, nat bool) (*v3.IPPool, error) {
	key := func(s string) string { return fmt.Sprintf("CALICO_IPV%dPOOL_%s", v, s) }
	var errs []error
	bad := func(k, val, why string) { errs = append(errs, fmt.Errorf("%s=%q: %s", k, val, why)) }
	p, err := netip.ParsePrefix(cidr)
	if err != nil || p.Addr().Is4() != (v == 4) {
		bad(key("CIDR"), cidr, fmt.Sprintf("not an IPv%d CIDR", v))
	}
	if s := getenv(key("BLOCK_SIZE")); s != "" {
		n, err := strconv.Atoi(s)
		lo, hi := 20, 32
		if v == 6 {
			lo, hi = 116, 128
		}
		if err != nil || n < lo || n > hi {
			bad(key("BLOCK_SIZE"), s, fmt.Sprintf("use %d to %d", lo, hi))
		}
		blockSize = n
	}
	ipip, vxlan := v3.IPIPModeNever, v3.VXLANModeNever
	if v == 4 {
		if s := getenv(key("IPIP")); s != "" {
			m, ok := encapMode(s)
			if !ok {
				bad(key("IPIP"), s, "use Always, CrossSubnet or Never")
			}
			ipip = v3.IPIPMode(m)
		}
	}
	if s := getenv(key("VXLAN")); s != "" {
		m, ok := encapMode(s)
		if !ok {
			bad(key("VXLAN"), s, "use Always, CrossSubnet or Never")
		}
		vxlan = v3.VXLANMode(m)
	}
	nat = envBool(getenv(key("NAT_OUTGOING")), nat)
	sel := getenv(key("NODE_SELECTOR"))
	if sel != "" {
		if _, err := selector.Parse(sel); err != nil {
			bad(key("NODE_SELECTOR"), sel, err.Error())
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &v3.IPPool{
		TypeMeta: typeMeta(v3.KindIPPool), ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v3.IPPoolSpec{CIDR: p.Masked().String(), BlockSize: blockSize, IPIPMode: ipip, VXLANMode: vxlan,
			NATOutgoing: nat, NodeSelector: sel, DisableBGPExport: envBool(getenv(key("DISABLE_BGP_EXPORT")), false)},
	}, nil
}

// encapMode reads Calico's IPIP/VXLAN mode spellings.
func encapMode(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "off", "never":
		return "Never", true
	case "crosssubnet", "cross-subnet":
		return "CrossSubnet", true
	case "always":
		return "Always", true
	}
	return "", false
}

// envBool is Calico's evaluateENVBool: unset is dflt; false, 0, no, n, f
// (any case) are false; anything else is true.
func envBool(v string, dflt bool) bool {
	if v == "" {
		return dflt
	}
	switch strings.ToLower(v) {
	case "false", "0", "no", "n", "f":
		return false
	}
	return true
}

// randomULA is a random RFC 4193 /48, Calico's default IPv6 pool.
func randomULA() string {
	var b [16]byte
	b[0] = 0xfd
	_, _ = rand.Read(b[1:6])
	return netip.PrefixFrom(netip.AddrFrom16(b), 48).String()
}
