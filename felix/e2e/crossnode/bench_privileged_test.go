//go:build privileged && integration

package crossnode

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// BenchmarkPrivilegedPodFirstConnection measures, per encapsulation mode,
// the time from the start of a pod's CNI ADD on node0 to the first
// successful TCP connection to it from a pod on node2 (another subnet in
// CrossSubnet), over 50 pods: the CNI, felix's policy for the new
// endpoint on node0, and (for a pod in a new block, every 8th with /29
// blocks) the route to it on node2 -- the route manager's, or with BGP
// confd + BIRD's -- are all on that path. Reported as p50-ms and p99-ms.
//
//	go test -tags privileged,integration -run '^$' -bench PodFirstConnection -benchtime 1x ./felix/e2e/crossnode/
func BenchmarkPrivilegedPodFirstConnection(b *testing.B) {
	for _, mode := range []struct {
		name     string
		subnetOf func(int) int
		vxlan    v3.VXLANMode
		bgp      bool
	}{
		{"VXLANAlways", nil, v3.VXLANModeAlways, false},
		{"VXLANCrossSubnet", multinode.TwoSubnets, v3.VXLANModeCrossSubnet, false},
		{"BGP", nil, v3.VXLANModeNever, true},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				benchFirstConnection(b, mode.subnetOf, mode.vxlan, mode.bgp)
			}
		})
	}
}

func benchFirstConnection(b *testing.B, subnetOf func(int) int, vxlan v3.VXLANMode, bgp bool) {
	b.StopTimer()
	l := newLabTB(b, subnetOf, multinode.PoolOptions{VXLAN: vxlan, IPIP: v3.IPIPModeNever, BlockSize: 29})
	if bgp {
		startConfd(b, l)
		deadline := time.Now().Add(time.Minute)
		for i := range l.pods {
			for j := range l.pods {
				for i != j && l.podToPod(i, j) != "" {
					if time.Now().After(deadline) {
						b.Fatal("BGP never converged")
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}
	}
	client := l.pods[2]
	const pods = 50
	var took, adds []time.Duration
	for i := range pods {
		start := time.Now()
		p := l.Nodes[0].AddPod(fmt.Sprintf("b%d", i))
		adds = append(adds, time.Since(start))
		addr := net.JoinHostPort(p.IP.String(), "8080")
		ln, err := netnstest.ListenTCP(p.NetNS, addr, "x")
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := netnstest.DialTCPWithin(client.NetNS, addr, 20*time.Millisecond); err == nil {
				break
			}
			if time.Since(start) > 30*time.Second {
				b.Fatalf("pod %d (%s) never reachable from node2", i, p.IP)
			}
		}
		took = append(took, time.Since(start))
		ln.Close()
	}
	slices.Sort(took)
	slices.Sort(adds)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
	// The CNI ADD alone (exec of the plugin, IPAM, wiring, endpoint).
	b.ReportMetric(ms(adds[len(adds)/2]), "add-p50-ms")
	b.ReportMetric(ms(adds[len(adds)*99/100]), "add-p99-ms")
	b.ReportMetric(0, "ns/op")
}
