package health

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Aggregator collects the components' reports. Safe for concurrent use.
type Aggregator struct {
	now func() time.Time

	mu    sync.Mutex
	comps map[string]*Reporter
}

// NewAggregator returns an empty Aggregator; now is the clock (time.Now
// when nil).
func NewAggregator(now func() time.Time) *Aggregator {
	if now == nil {
		now = time.Now
	}
	return &Aggregator{now: now, comps: map[string]*Reporter{}}
}

// Reporter is one component's handle.
type Reporter struct {
	a       *Aggregator
	name    string
	timeout time.Duration // 0: no liveness check

	// under a.mu
	lastBeat  time.Time
	ready     bool
	detail    string
	readyFunc func() (bool, string)
}

// Register adds a component. With livenessTimeout > 0 the component is
// live only while Heartbeat was called within that time (registering
// counts as the first beat). It starts not ready.
func (a *Aggregator) Register(name string, livenessTimeout time.Duration) *Reporter {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := &Reporter{a: a, name: name, timeout: livenessTimeout, lastBeat: a.now(), detail: "starting"}
	a.comps[name] = r
	return r
}

// Heartbeat says the component's loop turned.
func (r *Reporter) Heartbeat() {
	r.a.mu.Lock()
	r.lastBeat = r.a.now()
	r.a.mu.Unlock()
}

// SetReady records readiness, with a reason when not ready.
func (r *Reporter) SetReady(ready bool, detail string) {
	r.a.mu.Lock()
	r.ready, r.detail = ready, detail
	r.a.mu.Unlock()
}

// SetReadyFunc makes readiness whatever f says when asked (f must be
// cheap and safe for concurrent use).
func (r *Reporter) SetReadyFunc(f func() (bool, string)) {
	r.a.mu.Lock()
	r.readyFunc = f
	r.a.mu.Unlock()
}

// Report is one component's state.
type Report struct {
	Name          string
	Live, Ready   bool
	Detail        string
	SinceLastBeat time.Duration
}

func (r Report) String(kind string) string {
	ok := r.Live
	if kind == "readiness" {
		ok = r.Ready
	}
	s := fmt.Sprintf("%s: %s", r.Name, map[bool]string{true: "ok", false: "FAIL"}[ok])
	switch {
	case kind == "liveness" && !r.Live:
		s += fmt.Sprintf(" (no heartbeat for %s)", r.SinceLastBeat.Round(time.Millisecond))
	case kind == "readiness" && !r.Ready && r.Detail != "":
		s += " (" + r.Detail + ")"
	}
	return s
}

// Reports returns the state of the named components (all when none is
// named; "felix" names "felix" and "felix/<anything>"), by name; a name
// matching nothing is an error.
func (a *Aggregator) Reports(names ...string) ([]Report, error) {
	a.mu.Lock()
	var sel []*Reporter
	for n, r := range a.comps {
		if len(names) == 0 || slices.ContainsFunc(names, func(want string) bool { return n == want || strings.HasPrefix(n, want+"/") }) {
			sel = append(sel, r)
		}
	}
	for _, want := range names {
		if !slices.ContainsFunc(sel, func(r *Reporter) bool { return r.name == want || strings.HasPrefix(r.name, want+"/") }) {
			a.mu.Unlock()
			return nil, fmt.Errorf("no component %q", want)
		}
	}
	now := a.now()
	out := make([]Report, 0, len(sel))
	funcs := make([]func() (bool, string), len(sel))
	for i, r := range sel {
		since := now.Sub(r.lastBeat)
		out = append(out, Report{Name: r.name, Live: r.timeout == 0 || since <= r.timeout, Ready: r.ready, Detail: r.detail, SinceLastBeat: since})
		funcs[i] = r.readyFunc
	}
	a.mu.Unlock()
	for i, f := range funcs {
		if f != nil { // outside the lock: f may take its own
			out[i].Ready, out[i].Detail = f()
		}
	}
	slices.SortFunc(out, func(x, y Report) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// Summary is "ok" over reports for kind ("liveness" or "readiness"), and
// a text with one line per component.
func Summary(reports []Report, kind string) (bool, string) {
	all := true
	var b strings.Builder
	for _, r := range reports {
		ok := r.Live
		if kind == "readiness" {
			ok = r.Ready && r.Live
		}
		all = all && ok
		b.WriteString(r.String(kind))
		b.WriteByte('\n')
	}
	return all, b.String()
}
