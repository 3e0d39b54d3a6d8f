//go:build privileged && integration

package e2e

import (
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedRestartKeepsTrafficFlowing: a TCP connection between pods
// on two nodes stays up (no reset, no stall) while calico-node on one node
// is stopped with SIGTERM (exit 0; BIRD stops with a graceful restart, the
// peer and the kernel keep the routes), is started again, is killed with
// kill -9 (BIRD dies with it), and is started again; each time the agent
// converges (ready: every session Established, no graceful restart
// recovery running) and still works: a pod added after the last restart
// is reached from the other node.
func TestPrivilegedRestartKeepsTrafficFlowing(t *testing.T) {
	l := newBGPLab(t)
	a0 := l.agents[0]
	s := startStream(t, l.pods[1].NetNS, l.pods[0].NetNS, net.JoinHostPort(l.pods[1].IP.String(), "9090"))
	s.flows(t, 20, "stream started")
	routes := func(i int) string {
		out, err := l.c.Nodes[i].IP("route", "show", "proto", "bird")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	node0Routes, node1Routes := routes(0), routes(1)

	a0.stop(syscall.SIGTERM)
	if code := a0.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("calico-node exited %d after SIGTERM", code)
	}
	if !strings.Contains(a0.log.String(), "BIRD stopped for graceful restart") {
		t.Error("BIRD was not stopped with a graceful restart")
	}
	s.flows(t, 50, "stream while calico-node is stopped")
	if got := routes(0); got != node0Routes {
		t.Errorf("node0's BGP routes changed while calico-node was stopped:\n%s\nwas\n%s", got, node0Routes)
	}
	if got := routes(1); got != node1Routes {
		t.Errorf("node1 lost routes to node0 while node0's calico-node was stopped:\n%s\nwas\n%s", got, node1Routes)
	}
	a0.start()
	a0.waitReady(60 * time.Second)
	s.flows(t, 20, "stream after the restart")

	bird := a0.birdPid()
	a0.stop(syscall.SIGKILL)
	eventually(t, 5*time.Second, "BIRD gone with calico-node", func() (bool, string) {
		return a0.birdPid() == 0, "BIRD still runs"
	})
	_ = bird
	s.flows(t, 50, "stream while calico-node is killed")
	if got := routes(1); got != node1Routes {
		t.Errorf("node1 lost routes to node0 after kill -9:\n%s\nwas\n%s", got, node1Routes)
	}
	a0.start()
	a0.waitReady(60 * time.Second)
	s.flows(t, 20, "stream after the restart from kill -9")

	// Converged and working: a new pod on node0 is reached from node1's pod.
	p := l.c.Nodes[0].AddPod("late")
	addr := netnstest.ServeTCP(t, p.NetNS, net.JoinHostPort(p.IP.String(), "8080"), "late")
	eventually(t, 20*time.Second, "node1's pod reaches a pod added on node0 after the restarts", func() (bool, string) {
		got, err := netnstest.DialTCPWithin(l.pods[1].NetNS, addr, time.Second)
		if err != nil {
			return false, err.Error()
		}
		return got == "late", got
	})
	s.flows(t, 10, "stream at the end")
}
