package cluster

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDesiredPodRoutes: a route per pod-network address via its node;
// none for host-network pods, pods without an address or finished ones;
// of two pods with one address, the newer's node.
func TestDesiredPodRoutes(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	pod := func(ip, host string, phase corev1.PodPhase, created time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{Phase: phase, HostIP: host}}
		if ip != "" {
			p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		return p
	}
	got := desiredPodRoutes([]*corev1.Pod{
		pod("192.168.1.5", "10.77.0.11", corev1.PodRunning, t0),
		pod("10.77.0.12", "10.77.0.12", corev1.PodRunning, t0),                   // host network
		pod("", "10.77.0.12", corev1.PodPending, t0),                             // no address yet
		pod("192.168.1.6", "10.77.1.11", corev1.PodSucceeded, t0),                // finished
		pod("192.168.1.7", "10.77.0.11", corev1.PodRunning, t0),                  // older...
		pod("192.168.1.7", "10.77.1.11", corev1.PodRunning, t0.Add(time.Minute)), // ...newer wins
		pod("192.168.1.8", "", corev1.PodPending, t0),                            // no node address
	})
	want := map[netip.Addr]netip.Addr{
		netip.MustParseAddr("192.168.1.5"): netip.MustParseAddr("10.77.0.11"),
		netip.MustParseAddr("192.168.1.7"): netip.MustParseAddr("10.77.1.11"),
	}
	if len(got) != len(want) {
		t.Fatalf("routes %v, want %v", got, want)
	}
	for ip, via := range want {
		if got[ip] != via {
			t.Errorf("route to %s via %s, want %s", ip, got[ip], via)
		}
	}
}
