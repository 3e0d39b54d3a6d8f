//go:build privileged

package bird_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/confd/bird/birdtest"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/internal/netnstest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// meshInput is node-1's view of an n-node mesh (10.99.x.y/16 addresses,
// node-1 lowest, so all its mesh sessions are passive).
func meshInput(n int) render.Input {
	in := render.Input{NodeName: "node-1"}
	in.Pools = []v3.IPPool{{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v3.IPPoolSpec{CIDR: "10.244.0.0/16"}}}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%d", i)
		in.Nodes = append(in.Nodes, v3.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: fmt.Sprintf("10.99.%d.%d/16", i>>8, i&255)}}})
		in.Affinities = append(in.Affinities, v3.BlockAffinity{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v3.BlockAffinitySpec{State: v3.BlockAffinityStateConfirmed, Node: name, CIDR: fmt.Sprintf("10.244.%d.0/26", i%256)}})
	}
	return in
}

// BenchmarkPrivilegedPeerChange measures a BGPPeer change end to end on a
// real BIRD: render + atomic write + `bird -p -c` + `birdc configure`. Each
// iteration adds or removes one BGPPeer.
func BenchmarkPrivilegedPeerChange(b *testing.B) {
	for _, n := range []int{3, 1000} {
		b.Run(fmt.Sprintf("mesh%d", n), func(b *testing.B) {
			node := netnstest.New(b)
			base := meshInput(n)
			first, err := render.Render(base)
			if err != nil {
				b.Fatal(err)
			}
			d := birdtest.StartBIRD(b, node, first)
			drv, err := bird.NewDriver(d.ConfigPath, d.Ctl)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			withPeer := base
			withPeer.Peers = []v3.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor"},
				Spec: v3.BGPPeerSpec{PeerIP: "10.99.255.254", ASNumber: numorstring.ASNumber(65000)}}}
			i := 0
			for b.Loop() {
				in := base
				if i%2 == 0 {
					in = withPeer
				}
				i++
				text, err := render.Render(in)
				if err != nil {
					b.Fatal(err)
				}
				if err := drv.Apply(ctx, text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
