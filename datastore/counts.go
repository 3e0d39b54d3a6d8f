package datastore

import (
	"sync"
	"sync/atomic"
)

// kindCounts is a counter per resource kind. The datastore keeps its
// counts without a metrics library: the CNI plugin links this package
// into a process that makes one call and exits, and initialising
// Prometheus's client cost it ~0.5 ms of CPU per pod. Long-running
// components expose the counts through datastore/dsmetrics.
type kindCounts struct {
	m sync.Map // kind -> *atomic.Uint64
}

func (k *kindCounts) add(kind string, n uint64) {
	c, ok := k.m.Load(kind)
	if !ok {
		c, _ = k.m.LoadOrStore(kind, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(n)
}

func (k *kindCounts) get(kind string) uint64 {
	if c, ok := k.m.Load(kind); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
}

func (k *kindCounts) all() map[string]uint64 {
	out := map[string]uint64{}
	k.m.Range(func(kind, c any) bool {
		out[kind.(string)] = c.(*atomic.Uint64).Load()
		return true
	})
	return out
}
