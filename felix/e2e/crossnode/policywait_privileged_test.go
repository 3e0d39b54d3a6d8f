//go:build privileged && integration

package crossnode

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedCNIWaitsForPolicy: with policy_setup_timeout_seconds the
// CNI ADD returns only once felix has written the endpoint's status file,
// i.e. programmed its policy: the very first connection to a new pod
// from an allowed pod on another node succeeds (no retry), and the first
// one from a denied pod fails.
func TestPrivilegedCNIWaitsForPolicy(t *testing.T) {
	l := newLabWith(t, multinode.Options{Nodes: 3, PolicySetupTimeoutSeconds: 10},
		map[string]multinode.PoolOptions{poolCIDR: {VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever}})
	l.allPodToPod(t)
	allowed, denied := l.pods[1], l.pods[2]
	l.Create(ct.GNP("deny-node2-pod", v3.DefaultTierName, ct.Ptr(1.0), "all()", ct.Ingress, []v3.Rule{
		{Action: v3.Deny, Source: v3.EntityRule{Nets: []string{denied.IP.String() + "/32"}}},
		{Action: v3.Allow},
	}, nil))
	eventually(t, "the policy enforced on the existing pods", func() string {
		if l.podToPod(2, 0) == "" {
			return "node2's pod still reaches node0's"
		}
		return ""
	})
	for i := range 5 {
		p := l.Nodes[0].AddPod(fmt.Sprintf("new%d", i))
		if _, err := os.Stat(filepath.Join(l.Nodes[0].StatusPrefix, epstatus.DirName, "k8s default%2Fnew"+fmt.Sprint(i)+" eth0")); err != nil {
			t.Logf("status files: %v", ls(filepath.Join(l.Nodes[0].StatusPrefix, epstatus.DirName)))
			t.Fatalf("ADD returned without the status file: %v", err)
		}
		addr := net.JoinHostPort(p.IP.String(), "8080")
		serveWhoami(t, p.NetNS, addr)
		// Within 900 ms: before TCP's first SYN retransmission (1 s), so
		// only the very first SYN can have made it.
		if got, err := netnstest.DialTCPWithin(allowed.NetNS, addr, 900*time.Millisecond); err != nil || got != allowed.IP.String() {
			t.Errorf("first connection from the allowed pod to new pod %d: %q, %v", i, got, err)
		}
		if got, err := netnstest.DialTCPWithin(denied.NetNS, addr, 900*time.Millisecond); err == nil {
			t.Errorf("first connection from the denied pod to new pod %d got through (seen as %s)", i, got)
		}
	}
}

func ls(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
