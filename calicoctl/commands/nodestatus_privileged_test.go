//go:build privileged

package commands

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/bird/birdtest"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/internal/netnstest"
)

const statusCluster = `
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node1}
spec: {bgp: {ipv4Address: 10.99.0.1/24}}
---
apiVersion: projectcalico.org/v3
kind: Node
metadata: {name: node2}
spec: {bgp: {ipv4Address: 10.99.0.2/24}}
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: pool}
spec: {cidr: 10.244.0.0/16}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: tor}
spec: {peerIP: 10.99.0.254, asNumber: 65000}
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: rack-router}
spec: {node: node1, peerIP: 10.99.0.3, asNumber: 64512}
`

func renderNode(t *testing.T, node, logDir string) string {
	t.Helper()
	rs, err := v3.DecodeYAML([]byte(statusCluster))
	if err != nil {
		t.Fatal(err)
	}
	in, err := render.FromResources(node, rs)
	if err != nil {
		t.Fatal(err)
	}
	in.LogFile = filepath.Join(logDir, node+".log")
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPrivilegedNodeStatus runs two real BIRDs meshed in fresh namespaces
// (node1 also has a global and a node-specific peer that never answer)
// and checks node status reads node1's sessions from its control socket
// through the real birdc, in Calico's layout.
func TestPrivilegedNodeStatus(t *testing.T) {
	seg, n1, n2 := netnstest.New(t), netnstest.New(t), netnstest.New(t)
	birdtest.Bridge(t, seg)
	birdtest.Attach(t, seg, n1, "n1", "10.99.0.1/24")
	birdtest.Attach(t, seg, n2, "n2", "10.99.0.2/24")
	logDir := t.TempDir()
	d1 := birdtest.StartBIRD(t, n1, renderNode(t, "node1", logDir))
	d2 := birdtest.StartBIRD(t, n2, renderNode(t, "node2", logDir))
	d1.WaitEstablished(t, 15*time.Second, "Mesh_10_99_0_2")
	d2.WaitEstablished(t, 5*time.Second, "Mesh_10_99_0_1")

	var out, errOut bytes.Buffer
	// The real process list (the real BIRDs run) plus the agent, which
	// this test does not run (node/e2e runs node status beside the real
	// calico-node).
	procs := func() [][]string { return append(runningProcesses(), []string{"calico-node"}) }
	if !birdRunning(runningProcesses()) {
		t.Fatal("the BIRDs started are not seen as bird processes")
	}
	a := &app{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }, defaultConfig: "/nonexistent", procs: procs}
	start := time.Now()
	if code := run(a, []string{"node", "status", "--bird-socket=" + d1.Ctl.Socket}); code != 0 {
		t.Fatalf("node status: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	t.Logf("node status took %v:\n%s", time.Since(start), out.String())
	got := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?`).ReplaceAllString(out.String(), "<since>")
	lines := strings.Split(got, "\n")
	if lines[0] != "Calico process is running." || lines[2] != "IPv4 BGP status" {
		t.Errorf("header lines wrong:\n%s", got)
	}
	if !regexp.MustCompile(`\|\s+PEER ADDRESS\s+\|\s+PEER TYPE\s+\|\s+STATE\s+\|\s+SINCE\s+\|\s+INFO\s+\|`).MatchString(got) {
		t.Errorf("no table header:\n%s", got)
	}
	for _, row := range []string{
		`\| 10\.99\.0\.2 +\| node-to-node mesh \| up +\| <since> \| Established +\|`,
		`\| 10\.99\.0\.3 +\| node specific +\| start +\| <since> \| (Active|Connect|Idle)[^|]* \|`,
		`\| 10\.99\.0\.254 +\| global +\| start +\| <since> \| (Active|Connect|Idle)[^|]* \|`,
	} {
		if !regexp.MustCompile(`(?m)^` + row + `$`).MatchString(got) {
			t.Errorf("no row matching %s in:\n%s", row, got)
		}
	}
	if !strings.Contains(got, "IPv6 BGP status\nNo IPv6 peers found.\n") {
		t.Errorf("IPv6 section wrong:\n%s", got)
	}

	// A socket nobody listens on: non-zero, says what to fix.
	out.Reset()
	errOut.Reset()
	code := run(a, []string{"node", "status", "--bird-socket=" + filepath.Join(t.TempDir(), "bird.ctl")})
	if code == 0 || !strings.Contains(errOut.String(), "--bird-socket") {
		t.Errorf("missing socket: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	// No agent process: Calico's "not running", whatever BIRD does.
	out.Reset()
	errOut.Reset()
	a.procs = func() [][]string {
		var out [][]string
		for _, p := range runningProcesses() {
			if !agentRunning([][]string{p}) {
				out = append(out, p)
			}
		}
		return out
	}
	code = run(a, []string{"node", "status", "--bird-socket=" + d1.Ctl.Socket})
	if code == 0 || !strings.Contains(errOut.String(), "Calico process is not running.") {
		t.Errorf("no agent: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}
