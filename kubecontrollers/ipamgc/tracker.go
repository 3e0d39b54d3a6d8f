// Package ipamgc is kube-controllers' IPAM garbage collection: periodic
// passes of package ipam's leak check (CheckLeaks), of which only what has
// looked unused for the whole leak grace period is released (ReleaseLeaks,
// which re-checks each owner just before). As Calico's: a grace period
// counted from when this process first saw the address unused (handle
// ages are not trusted: etcd records carry none); what a deleted node
// held is reclaimed at once; a grace period of 0 turns leak collection
// off but still cleans up after deleted nodes.
package ipamgc

import "time"

// Tracker remembers since when each candidate has been seen, pass after
// pass. A candidate missing from a pass is forgotten: it starts over if it
// comes back. Not safe for concurrent use (one GC loop owns it).
type Tracker struct {
	since map[string]time.Time
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker { return &Tracker{since: map[string]time.Time{}} }

// Observe records one pass's candidates at now and forgets the others.
func (t *Tracker) Observe(now time.Time, keys []string) {
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		seen[k] = true
		if _, ok := t.since[k]; !ok {
			t.since[k] = now
		}
	}
	for k := range t.since {
		if !seen[k] {
			delete(t.since, k)
		}
	}
}

// Confirmed: key has been a candidate for at least grace (grace > 0).
func (t *Tracker) Confirmed(key string, now time.Time, grace time.Duration) bool {
	s, ok := t.since[key]
	return ok && grace > 0 && now.Sub(s) >= grace
}

// Forget drops a key (released, or found in use by the final re-check).
func (t *Tracker) Forget(key string) { delete(t.since, key) }

// Len is the number of candidates tracked.
func (t *Tracker) Len() int { return len(t.since) }
