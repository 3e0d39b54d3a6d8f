package lab

import "testing"

// TestProbePortsNeverRepeatSoon: a pod's UDP probes get distinct source
// ports until the whole ephemeral range is used, wrapping around inside
// it; pods have cycles of their own.
func TestProbePortsNeverRepeatSoon(t *testing.T) {
	var p probePorts
	seen := map[int]bool{}
	n := probePortHigh - probePortLow + 1
	for range n {
		port := p.take("x/a")
		if port < probePortLow || port > probePortHigh {
			t.Fatalf("port %d outside %d-%d", port, probePortLow, probePortHigh)
		}
		if seen[port] {
			t.Fatalf("port %d again after %d probes, before the range was used", port, len(seen))
		}
		seen[port] = true
	}
	if first := p.take("x/a"); !seen[first] {
		t.Fatalf("after the whole range: %d", first)
	}
	if other := p.take("y/b"); other < probePortLow || other > probePortHigh {
		t.Fatalf("another pod's port %d", other)
	}
}
