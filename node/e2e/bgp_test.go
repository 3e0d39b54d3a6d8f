//go:build privileged && integration

package e2e

import (
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// bgpLab is two nodes running calico-node with the bird backend on one
// subnet, a default pool without encapsulation (routes by BGP), and a
// pod per node wired by the real CNI plugin, the pod on node1 serving TCP.
type bgpLab struct {
	c      *multinode.Cluster
	agents []*agent
	pods   []*multinode.Pod
	addr   string // node1's pod's TCP server
}

func newBGPLab(t *testing.T) *bgpLab {
	c := multinode.New(t, multinode.Options{Nodes: 2, NoNodeResources: true})
	l := &bgpLab{c: c}
	for _, n := range c.Nodes {
		a := newAgent(t, c, n, "CALICO_NETWORKING_BACKEND=bird", "CALICO_IPV4POOL_CIDR=10.81.0.0/16",
			"CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=Never", "CALICO_IPV4POOL_NAT_OUTGOING=false")
		a.start()
		l.agents = append(l.agents, a)
	}
	for _, a := range l.agents {
		a.waitReady(60 * time.Second) // within the threshold: every session Established
	}
	for _, n := range c.Nodes {
		l.pods = append(l.pods, n.AddPod("p"))
	}
	l.addr = netnstest.ServeTCP(t, l.pods[1].NetNS, net.JoinHostPort(l.pods[1].IP.String(), "8080"), "hi from node1")
	l.reach(t, "pod on node0 -> pod on node1 over BGP routes")
	return l
}

// reach waits until the pod on node0 gets node1's pod's answer.
func (l *bgpLab) reach(t *testing.T, what string) {
	t.Helper()
	eventually(t, 20*time.Second, what, func() (bool, string) {
		got, err := netnstest.DialTCPWithin(l.pods[0].NetNS, l.addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		return got == "hi from node1", got
	})
}

// peerName is the BIRD protocol of node i's session to node j.
func (l *bgpLab) peerName(j int) string {
	return "Mesh_" + strings.ReplaceAll(l.c.Nodes[j].Addr.Addr().String(), ".", "_")
}

// TestPrivilegedBGPTwoNodes: calico-node on two nodes brings up the BGP
// session (both probes ready), pods on the two nodes reach each other over
// the routes BIRD installed; BIRD killed is restarted by calico-node and
// the session and pod traffic come back; readiness goes false (HTTP 503,
// probe exit 1 naming the peer) while the session is down and true again
// once it is up.
func TestPrivilegedBGPTwoNodes(t *testing.T) {
	l := newBGPLab(t)
	a0 := l.agents[0]
	if out, err := l.c.Nodes[0].IP("route", "show", "proto", "bird"); err != nil || !strings.Contains(out, "via "+l.c.Nodes[1].Addr.Addr().String()) {
		t.Errorf("node0's BGP routes: %q, %v", out, err)
	}

	// BIRD killed: restarted, session and traffic back.
	old := a0.birdPid()
	if old == 0 {
		t.Fatal("no BIRD on node0")
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "BIRD restarted on node0", func() (bool, string) {
		pid := a0.birdPid()
		return pid != 0 && pid != old, "pid " + itoa(pid)
	})
	a0.waitReady(30 * time.Second)
	l.reach(t, "pod traffic after BIRD's restart")

	// The session down (node1 disables its side): not ready, naming the
	// peer; back up: ready.
	a1 := l.agents[1]
	if out, code := a1.inNode("birdc", "-s", a1.dir+"/bird.ctl", "disable", l.peerName(0)); code != 0 {
		t.Fatalf("birdc disable: %s", out)
	}
	peer := l.c.Nodes[1].Addr.Addr().String()
	eventually(t, 20*time.Second, "node0 not ready while its only session is down", func() (bool, string) {
		out, code := a0.probe("-bird-ready")
		return code == 1 && strings.Contains(out, "calico/node is not ready: BIRD is not ready: BGP not established with "+peer), out
	})
	if code, body := a0.http("/readiness"); code != 503 || !strings.Contains(body, "bgp: FAIL (BGP not established with "+peer+")") {
		t.Errorf("/readiness with the session down: %d %q", code, body)
	}
	if code, _ := a0.http("/liveness"); code != 200 {
		t.Errorf("/liveness with the session down: %d, want 200 (a peer down is no reason to restart)", code)
	}
	if out, code := a1.inNode("birdc", "-s", a1.dir+"/bird.ctl", "enable", l.peerName(0)); code != 0 {
		t.Fatalf("birdc enable: %s", out)
	}
	a0.waitReady(30 * time.Second)
	if code, body := a0.http("/readiness"); code != 200 {
		t.Errorf("/readiness with the session back: %d %q", code, body)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
