//go:build privileged && integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/internal/multinode"
	nodeagent "github.com/tabbynet/tabby/node/agent"
)

// inProcessEnv, set to 1, makes this test binary calico-node: TestMain
// runs node/agent.Run (felix, confd, BIRD's supervisor and the rest as
// goroutines of one process) instead of the tests.
const inProcessEnv = "TABBY_E2E_CALICO_NODE_IN_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(inProcessEnv) == "1" {
		os.Exit(runCalicoNode())
	}
	os.Exit(m.Run())
}

// runCalicoNode is calico-node's agent, run as cmd/calico-node runs it.
func runCalicoNode() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := nodeagent.Run(ctx, nodeagent.Options{}); err != nil {
		fmt.Fprintf(os.Stderr, "calico-node: %v\n", err)
		return 1
	}
	return 0
}

// TestPrivilegedInProcessFelixAndConfdRaceFree: calico-node's agent runs
// felix and confd in one process (this test binary, built with -race, in
// a node namespace against a real etcd). Both start, both report ready
// at once, and both follow changes made together afterwards (felix
// programs a NAT-outgoing pool's ipset, confd renders a BGPPeer into
// bird.cfg); after SIGTERM the process exits 0 and the race detector
// reported nothing. Both agents once wired the datastore through shared
// package variables, which this test saw as a data race.
func TestPrivilegedInProcessFelixAndConfdRaceFree(t *testing.T) {
	if !raceEnabled {
		t.Fatal("this test proves felix and confd run in one process without a data race: run it with go test -race")
	}
	c := multinode.New(t, multinode.Options{Nodes: 1, Bare: true})
	n := c.Nodes[0]
	a := newAgent(t, c, n, "CALICO_IPV4POOL_CIDR=10.81.0.0/16", "CALICO_NETWORKING_BACKEND=bird")
	a.inProcess = true
	a.start()
	a.waitReady(90 * time.Second) // -race makes start-up several times slower
	eventually(t, 30*time.Second, "/readiness with felix and confd both ok", func() (bool, string) {
		code, body := a.http("/readiness")
		return code == 200 && strings.Contains(body, "confd: ok") && strings.Contains(body, "felix/dataplane: ok"), body
	})
	if out, code := a.inNode("iptables-save", "-t", "filter"); code != 0 || !strings.Contains(out, ":cali-INPUT") {
		t.Fatalf("felix programmed no cali-INPUT (exit %d):\n%s", code, out)
	}
	birdCfg := filepath.Join(a.dir, "bird.cfg")
	if data, err := os.ReadFile(birdCfg); err != nil || !strings.Contains(string(data), "router id "+n.Addr.Addr().String()) {
		t.Fatalf("confd's bird.cfg (%v):\n%s", err, data)
	}

	// One change for each, made together: both loops follow.
	c.CreatePool("masq", "10.82.0.0/16", multinode.PoolOptions{NATOutgoing: true})
	c.Create(&v3.BGPPeer{TypeMeta: metav1.TypeMeta{Kind: v3.KindBGPPeer}, ObjectMeta: metav1.ObjectMeta{Name: "tor"},
		Spec: v3.BGPPeerSpec{PeerIP: "10.99.0.254", ASNumber: 65010}})
	eventually(t, 30*time.Second, "felix: the NAT-outgoing pool in cali40masq-ipam-pools", func() (bool, string) {
		out, _ := a.inNode("ipset", "list", "cali40masq-ipam-pools")
		return strings.Contains(out, "10.82.0.0/16"), out
	})
	eventually(t, 30*time.Second, "confd: the BGPPeer in bird.cfg", func() (bool, string) {
		data, _ := os.ReadFile(birdCfg)
		return strings.Contains(string(data), "10.99.0.254"), string(data)
	})
	if !a.running() {
		t.Fatal("calico-node exited")
	}
	a.stop(syscall.SIGTERM)
	log := a.log.String()
	if strings.Contains(log, "DATA RACE") {
		t.Errorf("the race detector reported a data race:\n%s", log)
	}
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("calico-node exited %d after SIGTERM (66: the race detector found a race)", code)
	}
}
