package cluster

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// The underlay: the control plane's namespace holds one bridge per subnet
// (br<s>, 10.77.<s>.1/24) and routes between them; node i of a subnet is
// 10.77.<s>.<10+i>. The namespaces are the cluster's own, so these
// addresses never meet the host's.
const underlayFmt = "10.77.%d.%d"

// cpAddr is the control plane's address on subnet 0: the API server's and
// etcd's.
const cpAddr = "10.77.0.1"

// Ports of the control plane.
const (
	apiPort  = 6443
	etcdPort = 2379
)

func netnsPath(name string) string { return filepath.Join(harness.NetnsDir, name) }

// gateway is subnet s's router address (the control plane's).
func gateway(s int) string { return fmt.Sprintf(underlayFmt, s, 1) }

// nodeAddr is the underlay address of the i-th node (from 0) of subnet s.
func nodeAddr(s, i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf(underlayFmt+"/24", s, 11+i))
}

// ipn runs `ip -n ns args...`.
func ipn(ns string, args ...string) error {
	_, err := run(append([]string{"ip", "-n", ns}, args...)...)
	return err
}

// makeControlPlaneNetns creates the control plane's namespace with a
// bridge per subnet, forwarding on.
func makeControlPlaneNetns(name string, subnets int) error {
	if _, err := run("ip", "netns", "add", name); err != nil {
		return err
	}
	cmds := [][]string{{"link", "set", "lo", "up"}}
	for s := 0; s < subnets; s++ {
		br := fmt.Sprintf("br%d", s)
		cmds = append(cmds, []string{"link", "add", br, "type", "bridge"},
			[]string{"addr", "add", gateway(s) + "/24", "dev", br},
			[]string{"link", "set", br, "up"})
	}
	for _, c := range cmds {
		if err := ipn(name, c...); err != nil {
			return err
		}
	}
	_, err := run("ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return err
}

// makeNodeNetns creates node n's namespace, its eth0 a veth made inside
// the control plane's namespace and moved (so nothing passes through the
// root namespace), on bridge br<subnet>, with a default route via the
// control plane.
func makeNodeNetns(cp string, n NodeState) error {
	if _, err := run("ip", "netns", "add", n.Netns); err != nil {
		return err
	}
	peer := "v-" + strings.TrimPrefix(n.Name, "node-")
	if len(peer) > 15 {
		peer = peer[:15]
	}
	steps := []struct {
		ns   string
		args []string
	}{
		{cp, []string{"link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", n.Netns}},
		{cp, []string{"link", "set", peer, "master", fmt.Sprintf("br%d", n.Subnet), "up"}},
		{n.Netns, []string{"link", "set", "lo", "up"}},
		{n.Netns, []string{"addr", "add", n.Addr, "dev", "eth0"}},
		{n.Netns, []string{"link", "set", "eth0", "up"}},
		{n.Netns, []string{"route", "add", "default", "via", gateway(n.Subnet)}},
	}
	for _, s := range steps {
		if err := ipn(s.ns, s.args...); err != nil {
			return err
		}
	}
	return nil
}
