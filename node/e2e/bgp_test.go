//go:build privileged && integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
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

func newBGPLab(t *testing.T) *bgpLab { return newBGPLabWith(t, false) }

// newBGPLabWith is newBGPLab with the agents in this test binary
// (inProcess: see agent.inProcess) or the calico-node binary.
func newBGPLabWith(t *testing.T, inProcess bool) *bgpLab {
	c := multinode.New(t, multinode.Options{Nodes: 2, NoNodeResources: true})
	l := &bgpLab{c: c}
	for _, n := range c.Nodes {
		a := newAgent(t, c, n, "CALICO_NETWORKING_BACKEND=bird", "CALICO_IPV4POOL_CIDR=10.81.0.0/16", "TABBY_BIRD_HANG_TIMEOUT=3s",
			"FELIX_PROMETHEUSMETRICSENABLED=true",
			"CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=Never", "CALICO_IPV4POOL_NAT_OUTGOING=false")
		a.inProcess = inProcess
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
// the routes BIRD installed; BIRD killed, and BIRD hung, are restarted by
// calico-node and the session and pod traffic come back; readiness goes false (HTTP 503,
// probe exit 1 naming the peer) while the session is down and true again
// once it is up.
func TestPrivilegedBGPTwoNodes(t *testing.T) {
	l := newBGPLab(t)
	a0 := l.agents[0]
	if out, err := l.c.Nodes[0].IP("route", "show", "proto", "bird"); err != nil || !strings.Contains(out, "via "+l.c.Nodes[1].Addr.Addr().String()) {
		t.Errorf("node0's BGP routes: %q, %v", out, err)
	}

	// A CalicoNodeStatus for node0 is filled in from BIRD.
	period := uint32(1)
	l.c.Create(&v3.CalicoNodeStatus{TypeMeta: metav1.TypeMeta{Kind: v3.KindCalicoNodeStatus}, ObjectMeta: metav1.ObjectMeta{Name: "node0-status"},
		Spec: v3.CalicoNodeStatusSpec{Node: l.c.Nodes[0].Name, UpdatePeriodSeconds: &period,
			Classes: []v3.NodeStatusClassType{v3.NodeStatusClassTypeAgent, v3.NodeStatusClassTypeBGP, v3.NodeStatusClassTypeRoutes}}})
	peer := l.c.Nodes[1].Addr.Addr().String()
	nodeStatus := func() v3.CalicoNodeStatusStatus {
		r, err := l.c.Client.Get(context.Background(), datastore.Key{Kind: v3.KindCalicoNodeStatus, Name: "node0-status"})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*v3.CalicoNodeStatus).Status
	}
	eventually(t, 10*time.Second, "CalicoNodeStatus filled: BIRD ready, the mesh session Established, a route from the peer", func() (bool, string) {
		s := nodeStatus()
		fromPeer := false
		for _, r := range s.Routes.RoutesV4 {
			if r.Type == v3.RouteTypeFIB && r.LearnedFrom.SourceType == v3.RouteSourceTypeNodeMesh && r.LearnedFrom.PeerIP == peer && r.Gateway == peer &&
				netip.MustParsePrefix(r.Destination).Overlaps(netip.MustParsePrefix(l.pods[1].IP.String()+"/32")) {
				fromPeer = true
			}
		}
		ok := s.Agent.BIRDV4.State == v3.BGPDaemonStateReady && s.Agent.BIRDV4.RouterID == l.c.Nodes[0].Addr.Addr().String() &&
			s.BGP.NumberEstablishedV4 == 1 && len(s.BGP.PeersV4) == 1 && s.BGP.PeersV4[0].PeerIP == peer &&
			s.BGP.PeersV4[0].Type == v3.BGPPeerTypeNodeMesh && s.BGP.PeersV4[0].State == v3.BGPSessionStateEstablished &&
			fromPeer && !s.LastUpdated.IsZero()
		return ok, fmt.Sprintf("%+v", s)
	})

	// calicoctl node status beside the real agent: the agent process is
	// seen, and BIRD's mesh session with node1 is listed Established.
	eventually(t, 10*time.Second, "calicoctl node status on node0", func() (bool, string) {
		out, code := a0.inNode(calicoctlBin(t), "node", "status", "--bird-socket="+a0.dir+"/bird.ctl")
		return code == 0 && strings.HasPrefix(out, "Calico process is running.\n") &&
			regexp.MustCompile(`\| `+regexp.QuoteMeta(peer)+` +\| node-to-node mesh \| up +\| [^|]+\| Established +\|`).MatchString(out), out
	})

	// calico-node's metrics next to felix's.
	eventually(t, 10*time.Second, "metrics: the session, BIRD's start and confd's syncs", func() (bool, string) {
		out := a0.metrics()
		return strings.Contains(out, `tabby_bgp_sessions{established="true",ip_version="4"} 1`) &&
			strings.Contains(out, "tabby_bird_starts_total 1") && strings.Contains(out, "tabby_bird_up 1") &&
			!strings.Contains(out, `tabby_confd_syncs_total{result="ok"} 0`) && strings.Contains(out, "felix_"), out
	})

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

	// BIRD hung (SIGSTOP): no answer on its socket for longer than
	// TABBY_BIRD_HANG_TIMEOUT (3s here) -> killed and restarted.
	hung := a0.birdPid()
	if err := syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "hung BIRD replaced on node0", func() (bool, string) {
		pid := a0.birdPid()
		return pid != 0 && pid != hung, "pid " + itoa(pid)
	})
	if !strings.Contains(a0.log.String(), "BIRD does not answer on its socket; killing it to restart it") {
		t.Error("the supervisor did not say why it killed BIRD")
	}
	a0.waitReady(30 * time.Second)
	l.reach(t, "pod traffic after the hung BIRD's restart")
	if out := a0.metrics(); !strings.Contains(out, "tabby_bird_starts_total 3") {
		t.Errorf("BIRD's starts after two restarts: %s", grepLines(out, "tabby_bird_starts_total"))
	}

	// The session down (node1 disables its side): not ready, naming the
	// peer; back up: ready.
	a1 := l.agents[1]
	if out, code := a1.inNode("birdc", "-s", a1.dir+"/bird.ctl", "disable", l.peerName(0)); code != 0 {
		t.Fatalf("birdc disable: %s", out)
	}
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
	eventually(t, 10*time.Second, "CalicoNodeStatus shows the session down", func() (bool, string) {
		s := nodeStatus()
		return s.BGP.NumberEstablishedV4 == 0 && s.BGP.NumberNotEstablishedV4 == 1, fmt.Sprintf("%+v", s.BGP)
	})
	if out, code := a1.inNode("birdc", "-s", a1.dir+"/bird.ctl", "enable", l.peerName(0)); code != 0 {
		t.Fatalf("birdc enable: %s", out)
	}
	a0.waitReady(30 * time.Second)
	if code, body := a0.http("/readiness"); code != 200 {
		t.Errorf("/readiness with the session back: %d %q", code, body)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
