package dataplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// failures are the objects of one driver (ipsets, or the chains of one
// table) that could not be programmed. Each is retried with exponential
// backoff, at once when its desired state changes; until it is
// programmed the rules that depend on it fail closed (see failClosed).
// Not safe for concurrent use (its driver serialises it).
type failures struct {
	min, max time.Duration
	objs     map[string]*failure
	// fresh are the failures recorded since the last drain (for the
	// log and the failure counter).
	fresh []freshFailure
}

// freshFailure is one failed attempt to program an object.
type freshFailure struct {
	name    string
	err     error
	retryIn time.Duration
}

// drain returns and forgets the failures recorded since the last drain.
func (f *failures) drain() []freshFailure {
	out := f.fresh
	f.fresh = nil
	return out
}

// failure is one object's failure.
type failure struct {
	err     error
	since   time.Time // first failure of this streak
	retryAt time.Time
	backoff time.Duration
	// state is the desired state that failed; another is retried at once.
	state any
}

func newFailures(minBackoff, maxBackoff time.Duration) *failures {
	if minBackoff <= 0 {
		minBackoff = 100 * time.Millisecond
	}
	if maxBackoff < minBackoff {
		maxBackoff = minBackoff
	}
	return &failures{min: minBackoff, max: maxBackoff, objs: map[string]*failure{}}
}

// skip says whether the object should be left alone in an apply at now:
// it failed with this very desired state and its retry is not due.
func (f *failures) skip(name string, state any, now time.Time) bool {
	o, ok := f.objs[name]
	return ok && o.state == state && now.Before(o.retryAt)
}

// failed records that name could not be programmed with state, and
// returns the delay before its retry.
func (f *failures) failed(name string, state any, err error, now time.Time) time.Duration {
	o, ok := f.objs[name]
	if !ok {
		o = &failure{since: now, backoff: f.min}
		f.objs[name] = o
	} else {
		o.backoff = min(o.backoff*2, f.max)
	}
	o.err, o.state, o.retryAt = err, state, now.Add(o.backoff)
	f.fresh = append(f.fresh, freshFailure{name: name, err: err, retryIn: o.backoff})
	return o.backoff
}

// programmed forgets name's failure.
func (f *failures) programmed(name string) { delete(f.objs, name) }

// keepOnly forgets the failures of objects no longer desired.
func (f *failures) keepOnly(wanted func(name string) bool) {
	for name := range f.objs {
		if !wanted(name) {
			delete(f.objs, name)
		}
	}
}

// has says whether name is failed (not programmed as desired).
func (f *failures) has(name string) bool { _, ok := f.objs[name]; return ok }

// names are the failed objects, sorted.
func (f *failures) names() []string { return slices.Sorted(maps.Keys(f.objs)) }

// nextRetry is the earliest retry time (zero without failures).
func (f *failures) nextRetry() time.Time {
	var next time.Time
	for _, o := range f.objs {
		if next.IsZero() || o.retryAt.Before(next) {
			next = o.retryAt
		}
	}
	return next
}

// describe says which objects failed and why, for readiness.
func (f *failures) describe(kind string) []string {
	var out []string
	for _, name := range f.names() {
		out = append(out, fmt.Sprintf("%s %s could not be programmed: %v", kind, name, oneLine(f.objs[name].err)))
	}
	return out
}

// oneLine is err's message on one line, shortened for a readiness answer.
func oneLine(err error) string {
	s := strings.Join(strings.Fields(fmt.Sprint(err)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
