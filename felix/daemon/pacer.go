package daemon

import "time"

// Sustained churn: at least churnCount computations within churnWindow
// (over 40 a second, while isolated changes come at most every few tens
// of milliseconds); the next computation then starts no earlier than
// churnSpacing after the last one ended, so a change waits at most that
// much longer and the kernel is updated at most ~40 times a second.
const (
	churnCount   = 8
	churnWindow  = 200 * time.Millisecond
	churnSpacing = 25 * time.Millisecond
)

// pacer decides how long a computation waits once woken: at least the
// debounce (to coalesce a burst of updates into one computation), at
// least as long as the last computation took after it ended (computing
// uses at most about half a core), and under sustained churn at least
// churnSpacing after the last one ended (each computation that changes
// something costs a kernel update). It is pure: the caller gives the
// clock's readings. Not safe for concurrent use (Run's loop owns it).
type pacer struct {
	debounce time.Duration
	lastEnd  time.Time
	lastTook time.Duration
	// starts are the start times of the last churnCount computations
	// (a ring; next is the oldest).
	starts [churnCount]time.Time
	next   int
}

// wait is how long, from now, the next computation waits.
func (p *pacer) wait(now time.Time) time.Duration {
	w := max(p.debounce, p.lastEnd.Add(p.lastTook).Sub(now))
	if p.busy(now) {
		w = max(w, p.lastEnd.Add(churnSpacing).Sub(now))
	}
	return w
}

// done records a computation that ran from start to end; computed false
// (the snapshot still loading) is no churn and does not slow the next.
func (p *pacer) done(start, end time.Time, computed bool) {
	p.lastEnd = end
	if !computed {
		p.lastTook = 0
		return
	}
	p.lastTook = end.Sub(start)
	p.starts[p.next] = start
	p.next = (p.next + 1) % churnCount
}

// busy says whether the last churnCount computations all started within
// churnWindow before now.
func (p *pacer) busy(now time.Time) bool {
	oldest := p.starts[p.next]
	return !oldest.IsZero() && now.Sub(oldest) < churnWindow
}
