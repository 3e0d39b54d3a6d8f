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
	// A node may hold more than one block (calico-node claims its tunnel
	// address while the pods' ADDs claim theirs): each route is checked by
	// where it goes.
	node1, node2 := peerAddr(l.State.Nodes[1]), peerAddr(l.State.Nodes[2])
	var viaTunnel, direct int
	for _, line := range strings.Split(string(routes), "\n") {
		if !strings.HasPrefix(line, "10.203.") || !strings.Contains(line, " via ") {
			continue
		}
		switch {
		case strings.Contains(line, " via "+node2+" dev tunl0"):
			viaTunnel++
		case strings.Contains(line, " via "+node1+" dev eth0"):
			direct++
		default:
			t.Errorf("node0's route %q: want node1's blocks via %s dev eth0, node2's via %s dev tunl0", line, node1, node2)
		}
	}
	if viaTunnel == 0 || direct == 0 {
		t.Errorf("node0's routes to the other blocks: %d over tunl0, %d direct; want both:\n%s", viaTunnel, direct, routes)
	}
	policyStory(t, l, start)
}
