package render

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bigCluster has n nodes (10.x.y.z addresses), one block per node and one
// pool; the first rrs nodes are route reflectors labelled route-reflector.
func bigCluster(n, rrs int) Input {
	in := Input{NodeName: "node-0"}
	off := false
	in.BGPConfigurations = []v3.BGPConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	if rrs > 0 {
		in.BGPConfigurations[0].Spec.NodeToNodeMeshEnabled = &off
		in.Peers = []v3.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "peer-with-rrs"},
			Spec: v3.BGPPeerSpec{NodeSelector: "all()", PeerSelector: "route-reflector == 'true'"}}}
	}
	in.Pools = []v3.IPPool{{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v3.IPPoolSpec{CIDR: "10.128.0.0/9"}}}
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		nd := node(name, fmt.Sprintf("10.%d.%d.%d/8", (i+1)>>16&255, (i+1)>>8&255, (i+1)&255))
		if i < rrs {
			nd.Labels = map[string]string{"route-reflector": "true"}
			nd.Spec.BGP.RouteReflectorClusterID = "244.0.0.1"
		}
		in.Nodes = append(in.Nodes, nd)
		in.Affinities = append(in.Affinities, v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v3.BlockAffinitySpec{State: v3.BlockAffinityStateConfirmed, Node: name,
				CIDR: fmt.Sprintf("10.%d.%d.0/26", 128+i>>8&127, i&255)}})
	}
	return in
}

func benchRender(b *testing.B, in Input) {
	b.ReportAllocs()
	var size int
	for b.Loop() {
		out, err := Render(in)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "bytes/config")
}

// BenchmarkRenderMesh1000: one node's config in a 1,000-node full mesh (999 sessions).
func BenchmarkRenderMesh1000(b *testing.B) { benchRender(b, bigCluster(1000, 0)) }

// BenchmarkRenderRR1000Reflector: a route reflector's config with 997 clients
// and 2 other reflectors (the largest config of an RR topology).
func BenchmarkRenderRR1000Reflector(b *testing.B) { benchRender(b, bigCluster(1000, 3)) }

// BenchmarkRenderRR1000Client: a client's config in the same topology (3 sessions).
func BenchmarkRenderRR1000Client(b *testing.B) {
	in := bigCluster(1000, 3)
	in.NodeName = "node-500"
	benchRender(b, in)
}

func TestBigClusterShapes(t *testing.T) {
	for _, tc := range []struct {
		rrs  int
		node string
		want int
	}{{0, "node-0", 999}, {3, "node-0", 999}, {3, "node-500", 3}} {
		in := bigCluster(1000, tc.rrs)
		in.NodeName = tc.node
		m, err := build(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(m.fam[0].peers); got != tc.want {
			t.Errorf("rrs=%d node=%s: %d peers, want %d", tc.rrs, tc.node, got, tc.want)
		}
	}
}

// TestBigConfigParsesWithBIRD: BIRD accepts the 1,000-node mesh and RR configs.
func TestBigConfigParsesWithBIRD(t *testing.T) {
	for _, rrs := range []int{0, 3} {
		out, err := Render(bigCluster(1000, rrs))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "bird.conf")
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("bird", "-p", "-c", path).CombinedOutput(); err != nil {
			t.Fatalf("rrs=%d: bird -p: %v\n%s", rrs, err, out)
		}
	}
}
