//go:build privileged

package bird_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/confd/bird/birdtest"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/internal/netnstest"
)

const twoNodes = `
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
kind: BlockAffinity
metadata: {name: b1}
spec: {state: confirmed, node: node1, cidr: 10.244.1.0/26, deleted: false}
---
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {name: b2}
spec: {state: confirmed, node: node2, cidr: 10.244.2.0/26, deleted: false}
`

const extraPeerAndBlock = `
---
apiVersion: projectcalico.org/v3
kind: BGPPeer
metadata: {name: tor}
spec: {node: node1, peerIP: 10.99.0.254, asNumber: 65000}
---
apiVersion: projectcalico.org/v3
kind: BlockAffinity
metadata: {name: b1b}
spec: {state: confirmed, node: node1, cidr: 10.244.1.64/26, deleted: false}
`

func renderYAML(t testing.TB, node, yaml, logFile string) string {
	t.Helper()
	rs, err := v3.DecodeYAML([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	in, err := render.FromResources(node, rs)
	if err != nil {
		t.Fatal(err)
	}
	in.LogFile = logFile
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPrivilegedDriverKeepsSessions runs two real BIRDs in namespaces and
// drives node1's through the Driver: a broken config is refused with BIRD's
// file:line:col and the old one keeps running; a config that adds a peer and
// a block is applied without restarting the mesh session.
func TestPrivilegedDriverKeepsSessions(t *testing.T) {
	seg, n1, n2 := netnstest.New(t), netnstest.New(t), netnstest.New(t)
	birdtest.Bridge(t, seg)
	birdtest.Attach(t, seg, n1, "n1", "10.99.0.1/24")
	birdtest.Attach(t, seg, n2, "n2", "10.99.0.2/24")

	logDir := t.TempDir()
	cfg1 := renderYAML(t, "node1", twoNodes, filepath.Join(logDir, "node1.log"))
	d1 := birdtest.StartBIRD(t, n1, cfg1)
	d2 := birdtest.StartBIRD(t, n2, renderYAML(t, "node2", twoNodes, filepath.Join(logDir, "node2.log")))
	before := d1.WaitEstablished(t, 15*time.Second, "Mesh_10_99_0_2")
	d2.WaitEstablished(t, 5*time.Second, "Mesh_10_99_0_1")

	drv, err := bird.NewDriver(d1.ConfigPath, d1.Ctl)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := drv.Apply(ctx, cfg1); err != nil {
		t.Fatalf("re-applying the running config: %v", err)
	}

	// Broken config: refused at validation, with BIRD's position.
	err = drv.Apply(ctx, cfg1+"\nprotocol bgp Broken {\n  neighbor 10.99.0.9 as;\n}\n")
	var ce *bird.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, bird.ErrInvalidConfig) {
		t.Fatalf("broken config: error = %v, want a *ConfigError", err)
	}
	if !regexp.MustCompile(`bird\.conf\.new:\d+:\d+ `).MatchString(ce.Message) {
		t.Errorf("error %q lacks BIRD's file:line:col", ce.Message)
	}
	t.Logf("broken config refused: %v", err)
	if live, _ := os.ReadFile(d1.ConfigPath); string(live) != cfg1 {
		t.Errorf("live config changed after a refused apply")
	}
	afterBroken := d1.WaitEstablished(t, time.Second, "Mesh_10_99_0_2")
	if afterBroken["Mesh_10_99_0_2"].Since != before["Mesh_10_99_0_2"].Since {
		t.Errorf("mesh session restarted by a refused config: %v -> %v", before["Mesh_10_99_0_2"], afterBroken["Mesh_10_99_0_2"])
	}

	// Changed config: a new peer and a new block. The mesh session stays up
	// (same Since) and node2 learns the new block.
	cfg2 := renderYAML(t, "node1", twoNodes+extraPeerAndBlock, filepath.Join(logDir, "node1.log"))
	start := time.Now()
	if err := drv.Apply(ctx, cfg2); err != nil {
		t.Fatalf("applying changed config: %v", err)
	}
	t.Logf("apply (write + bird -p + birdc configure) took %v", time.Since(start))
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := birdtest.MustInNS(t, n2, "ip", "route", "show", "proto", "bird")
		if strings.Contains(out, "10.244.1.64/26 via 10.99.0.1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node2 did not learn the new block; routes:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	after, err := d1.Protocols()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after["Node_10_99_0_254"]; !ok {
		t.Errorf("new peer protocol missing: %v", after)
	}
	m := after["Mesh_10_99_0_2"]
	if !strings.HasPrefix(m.Info, "Established") || m.Since != before["Mesh_10_99_0_2"].Since {
		t.Errorf("mesh session restarted by a peer/block change: before %+v after %+v", before["Mesh_10_99_0_2"], m)
	}
}
