//go:build privileged && ipip

// The IPIP variant needs the kernel's ipip module (tunl0). The machines
// this project runs on so far have a kernel without it (no module tree,
// `ip link add type ipip` answers "Unknown device type"), so the test is
// kept behind its own build tag rather than skipped or faked: run it with
// -tags privileged,ipip on a kernel that has IPIP.

package lab

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestPrivilegedLabIPIPCrossSubnetTwoSubnets: node0 and node1 on one
// subnet, node2 on another behind the underlay's router; an IPIP
// CrossSubnet pool with BGP: node0 reaches node1's block directly and
// node2's through tunl0; the policy story holds.
func TestPrivilegedLabIPIPCrossSubnetTwoSubnets(t *testing.T) {
	m := DefaultModel()
	m.Nodes = Nodes{{Name: "node0"}, {Name: "node1"}, {Name: "node2", Subnet: 1}}
	m.Pools = []Pool{{Name: "ipip-cs", Spec: v3.IPPoolSpec{CIDR: "10.203.0.0/16", IPIPMode: v3.IPIPModeCrossSubnet, VXLANMode: v3.VXLANModeNever, BlockSize: 26}}}
	l, start := upLab(t, m, DatastoreEtcd)
	probeUntil(t, l, allAllowed, 30*time.Second)
	routes, err := exec.Command("ip", "-n", l.State.Nodes[0].Netns, "-4", "route", "show").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	var viaTunnel, direct int
	for _, line := range strings.Split(string(routes), "\n") {
		if !strings.HasPrefix(line, "10.203.") || !strings.Contains(line, " via ") {
			continue
		}
		if strings.Contains(line, "dev tunl0") {
			viaTunnel++
		} else if strings.Contains(line, "dev eth0") {
			direct++
		}
	}
	if viaTunnel != 1 || direct != 1 {
		t.Errorf("node0's routes to the other blocks: %d over tunl0, %d direct; want 1 and 1:\n%s", viaTunnel, direct, routes)
	}
	policyStory(t, l, start)
}
