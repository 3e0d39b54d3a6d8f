//go:build privileged && vm

package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestPrivilegedLabVMsIPIPCrossSubnet: the lab's IPIP model on VMs
// booting Debian's kernel (up --vms): node0 and node1 on one subnet, node2
// on another; an IPIP CrossSubnet pool with BGP. up returns on the full
// matrix; node0 reaches node1's blocks directly and node2's through tunl0;
// the sample policy applied (the wait reads each VM's iptables) gives the
// expected table at the first probe, deleted gives all allowed; down
// leaves no VM, process or namespace.
func TestPrivilegedLabVMsIPIPCrossSubnet(t *testing.T) {
	m := DefaultModel()
	m.Nodes = Nodes{{Name: "node0"}, {Name: "node1"}, {Name: "node2", Subnet: 1}}
	m.Pools = []Pool{{Name: "ipip-cs", Spec: v3.IPPoolSpec{CIDR: "10.203.0.0/16", IPIPMode: v3.IPIPModeCrossSubnet, VXLANMode: v3.VXLANModeNever, BlockSize: 26}}}
	start := time.Now()
	l, err := Up(context.Background(), UpOptions{Dir: stateDir(t), Bin: labBin(t), Model: m, Datastore: DatastoreEtcd, Out: logWriter{t}, VMs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	t.Logf("up --vms to full matrix: %v", time.Since(start).Round(time.Second))
	r, err := l.State.Nodes[0].VM.vmExec("", nil, "ip", "-4", "route", "show")
	if err != nil {
		t.Fatal(err)
	}
	node1, node2 := l.State.Nodes[1].VM.Addr, l.State.Nodes[2].VM.Addr
	var viaTunnel, direct int
	for _, line := range strings.Split(r.Output, "\n") {
		if !strings.HasPrefix(line, "10.203.") || !strings.Contains(line, " via ") {
			continue
		}
		switch {
		case strings.Contains(line, " via "+node2+" dev tunl0"):
			viaTunnel++
		case strings.Contains(line, " via "+node1+" dev ") && !strings.Contains(line, "tunl0"):
			direct++
		default:
			t.Errorf("node0's route %q: want node1's blocks via %s directly, node2's via %s dev tunl0", line, node1, node2)
		}
	}
	if viaTunnel == 0 || direct == 0 {
		t.Errorf("node0's routes to the other blocks: %d over tunl0, %d direct; want both:\n%s", viaTunnel, direct, r.Output)
	}
	sample := readExample(t, "deny-x-allow-from-y.yaml")
	applyAndWait(t, l, sample, false)
	res := probeExactly(t, l, sampleVerdict)
	t.Logf("%d probes:\n%s", len(res), Matrix(res))
	applyAndWait(t, l, sample, true)
	probeExactly(t, l, allAllowed)
	downAndCheck(t, l)
}
