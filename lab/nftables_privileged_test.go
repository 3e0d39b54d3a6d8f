//go:build privileged

package lab

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/felix/dataplane"
)

// TestPrivilegedLabNftables is the nftables leg of the lab's matrix
// (TestPrivilegedLabEtcd is the iptables one): `up --dataplane nftables`
// makes every node's felix program nftables alone (its calico table; no
// cali- chain in any iptables backend, no cali ipset), and the lab's
// policy story (the sample NetworkPolicies' truth table, an edit, a Calico
// policy through calicoctl, each apply waiting on felix's endpoint
// report) gives exactly the tables it gives in iptables mode.
func TestPrivilegedLabNftables(t *testing.T) {
	l, start := upLabWith(t, UpOptions{Model: DefaultModel(), Datastore: DatastoreEtcd, Dataplane: DataplaneNftables})
	for _, n := range l.State.Nodes {
		if err := dataplaneHeld(n, DataplaneNftables); err != nil {
			t.Errorf("%s: %v", n.Name, err)
		}
	}
	policyStory(t, l, start)
}

// TestPrivilegedLabNftablesLiveSwitch: two nodes under the sample policy,
// a TCP stream from a pod of y to a pod of x on the other node (a round
// trip every 20 ms); FelixConfiguration nftablesMode Disabled -> Enabled
// -> Disabled. felix applies the setting at start, so each node's
// felix restarts inside calico-node (calico-node keeps running); after
// each switch both nodes hold the new mode's rules only (nothing of the
// other: no calico table, or no cali- chain and no cali ipset), the truth
// table of the sample is exact on the first probe, and the stream never
// broke.
func TestPrivilegedLabNftablesLiveSwitch(t *testing.T) {
	m, err := DefaultModel().WithNodes(2)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := upLabWith(t, UpOptions{Model: m, Datastore: DatastoreEtcd})
	applyAndWait(t, l, readExample(t, "deny-x-allow-from-y.yaml"), false)
	probeExactly(t, l, sampleVerdict)
	from, to := crossNodePods(t, l, "y", "x")
	s := startStream(t, from, to)
	for _, step := range []struct{ setting, mode string }{
		{"Disabled", DataplaneIptables}, {"Enabled", DataplaneNftables}, {"Disabled", DataplaneIptables}} {
		before := s.roundTrips()
		switchStart := time.Now()
		switchDataplane(t, l, step.setting, step.mode)
		for _, n := range l.State.Nodes {
			if err := dataplaneHeld(n, step.mode); err != nil {
				t.Errorf("nftablesMode %s, %s: %v", step.setting, n.Name, err)
			}
		}
		probeExactly(t, l, sampleVerdict)
		time.Sleep(200 * time.Millisecond) // round trips under the new rules alone
		t.Logf("nftablesMode %s: switched and checked in %s, %d round trips meanwhile", step.setting,
			time.Since(switchStart).Round(time.Millisecond), s.roundTrips()-before)
		if err := s.err(); err != nil {
			t.Fatalf("the stream %s -> %s broke (nftablesMode %s): %v", from.Key(), to.Key(), step.setting, err)
		}
		if s.roundTrips() == before {
			t.Fatalf("no round trip of the stream during the switch to nftablesMode %s", step.setting)
		}
	}
	n := s.stop()
	if err := s.err(); err != nil {
		t.Fatalf("the stream broke: %v", err)
	}
	t.Logf("stream %s -> %s: %d round trips, none failed", from.Key(), to.Key(), n)
	downAndCheck(t, l)
}

// upLabWith builds a lab with o (Dir, Bin and Out filled in).
func upLabWith(t testing.TB, o UpOptions) (*Lab, time.Time) {
	t.Helper()
	o.Dir, o.Bin, o.Out = stateDir(t), labBin(t), logWriter{t}
	start := time.Now()
	l, err := Up(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, start
}

// switchDataplane patches the default FelixConfiguration's nftablesMode
// and waits until every node's felix, restarted inside calico-node to
// apply it (felix applies it at start; calico-node keeps running, as
// Calico's runit restarts only felix), holds mode's rules and the agents
// are ready again.
func switchDataplane(t *testing.T, l *Lab, setting, mode string) {
	t.Helper()
	calicoctlRun(t, l, "patch", "felixconfiguration", "default", "-p", fmt.Sprintf(`{"spec":{"nftablesMode":%q}}`, setting))
	for i := range l.State.Nodes {
		n := &l.State.Nodes[i]
		deadline := time.Now().Add(60 * time.Second)
		for err := dataplaneHeld(*n, mode); err != nil; err = dataplaneHeld(*n, mode) {
			if state := l.agentState(n); strings.HasPrefix(state, "not running") {
				t.Fatalf("%s: calico-node exited on nftablesMode %s (felix restarts inside it): %s", n.Name, setting, state)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in %s mode 60s after nftablesMode %s: %v", n.Name, mode, setting, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := l.waitAgentsReady(context.Background(), nil, 90*time.Second); err != nil {
		t.Fatal(err)
	}
}

// dataplaneHeld checks that node n's felix rules are those of mode only:
// nftables: its calico table, no cali- chain in either iptables backend
// and no cali ipset; iptables: cali- chains, no calico nftables table.
func dataplaneHeld(n NodeState, mode string) error {
	run := dataplane.ExecRunner{NetnsPath: netnsPath(n.Netns)}
	out := func(name string, args ...string) (string, error) {
		b, err := run.Run(context.Background(), name, args, nil)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return string(b), nil
	}
	tables, err := out("nft", "list", "tables")
	if err != nil {
		return err
	}
	nftSave, err := out("iptables-nft-save")
	if err != nil {
		return err
	}
	legacySave, err := out("iptables-legacy-save")
	if err != nil {
		return err
	}
	sets, err := out("ipset", "list", "-n")
	if err != nil {
		return err
	}
	hasNft := strings.Contains(tables, "table ip calico") || strings.Contains(tables, "table ip6 calico")
	hasIpt := strings.Contains(nftSave+legacySave, "cali-")
	switch {
	case mode == DataplaneNftables && !strings.Contains(tables, "table ip calico"):
		return fmt.Errorf("nftables mode without felix's table:\n%s", tables)
	case mode == DataplaneNftables && (hasIpt || strings.Contains(sets, "cali")):
		return fmt.Errorf("nftables mode left iptables rules or ipsets:\n%s%s%s", nftSave, legacySave, sets)
	case mode == DataplaneIptables && !hasIpt:
		return fmt.Errorf("iptables mode without cali- chains:\n%s", nftSave)
	case mode == DataplaneIptables && hasNft:
		return fmt.Errorf("iptables mode left felix's nftables table:\n%s", tables)
	}
	return nil
}

// crossNodePods picks a pod of namespace fromNS and one of toNS on
// another node.
func crossNodePods(t *testing.T, l *Lab, fromNS, toNS string) (PodState, PodState) {
	t.Helper()
	for _, a := range l.State.Pods {
		for _, b := range l.State.Pods {
			if a.Namespace == fromNS && b.Namespace == toNS && a.Node != b.Node && a.IP != "" && b.IP != "" {
				return a, b
			}
		}
	}
	t.Fatalf("no pods of %s and %s on different nodes", fromNS, toNS)
	return PodState{}, PodState{}
}

// stream is one TCP connection between two pods carrying a numbered
// round trip every 20 ms until stopped; the first failure ends it.
type stream struct {
	mu    sync.Mutex
	n     int
	fail  error
	done  chan struct{}
	ended chan struct{}
}

const streamPort = 7070

// startStream listens in to's namespace, connects from from's and starts
// the round trips; both ends are closed when the test ends.
func startStream(t *testing.T, from, to PodState) *stream {
	t.Helper()
	var ln net.Listener
	if err := inNetns(to.Netns, func() (err error) { ln, err = net.Listen("tcp", fmt.Sprintf(":%d", streamPort)); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go echo(ln)
	var conn net.Conn
	addr := net.JoinHostPort(to.IP, fmt.Sprint(streamPort))
	if err := inNetns(from.Netns, func() (err error) { conn, err = net.DialTimeout("tcp", addr, 5*time.Second); return err }); err != nil {
		t.Fatalf("connecting %s -> %s: %v", from.Key(), addr, err)
	}
	s := &stream{done: make(chan struct{}), ended: make(chan struct{})}
	t.Cleanup(func() { s.stop(); _ = conn.Close() })
	go s.run(conn)
	return s
}

// inNetns runs f in the named namespace (sockets made there stay there).
func inNetns(name string, f func() error) error {
	netns, err := ns.GetNS(netnsPath(name))
	if err != nil {
		return err
	}
	defer netns.Close()
	return netns.Do(func(ns.NetNS) error { return f() })
}

// echo answers every 8 bytes of each connection with the same 8 bytes.
func echo(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

func (s *stream) run(conn net.Conn) {
	defer close(s.ended)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var out, in [8]byte
	for i := uint64(1); ; i++ {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		binary.BigEndian.PutUint64(out[:], i)
		// Generous: a node's restart pauses forwarding only as long as
		// BIRD's graceful restart keeps the routes, never the connection.
		_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
		if _, err := conn.Write(out[:]); err != nil {
			s.setErr(fmt.Errorf("round trip %d: write: %w", i, err))
			return
		}
		if _, err := io.ReadFull(conn, in[:]); err != nil || in != out {
			s.setErr(fmt.Errorf("round trip %d: read %x (want %x): %v", i, in, out, err))
			return
		}
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
	}
}

func (s *stream) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

func (s *stream) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail
}

func (s *stream) roundTrips() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// stop ends the round trips and returns how many there were.
func (s *stream) stop() int {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	<-s.ended
	return s.roundTrips()
}
