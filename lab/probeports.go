package lab

import (
	"math/rand/v2"
	"sync"
)

// The ephemeral range the kernel picks source ports from (Linux's
// default ip_local_port_range).
const (
	probePortLow  = 32768
	probePortHigh = 60999
)

// probePorts hands out UDP source ports for probes, per source pod, in a
// cycle through the ephemeral range from a random start. A UDP probe that
// reused the source port of an earlier allowed probe to the same target
// would match that flow's conntrack entry (still live for 30-120 s) and
// be let through as established, as Calico lets existing flows through
// after a policy denies new ones: a probe must always be a new flow. The
// kernel's own pick is random, so such a reuse is rare but real (seen in
// the lab's tests under load).
type probePorts struct {
	mu   sync.Mutex
	next map[string]int // by source pod
}

// take returns the next source port for a probe from pod.
func (p *probePorts) take(pod string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = map[string]int{}
	}
	n, ok := p.next[pod]
	if !ok {
		n = probePortLow + rand.IntN(probePortHigh-probePortLow+1)
	}
	next := n + 1
	if next > probePortHigh {
		next = probePortLow
	}
	p.next[pod] = next
	return n
}
