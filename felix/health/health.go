// Package health is felix's /liveness and /readiness (Calico's health
// endpoints). Liveness fails when one of felix's loops (the calculation,
// the dataplane) has been stuck in one iteration for longer than the
// timeout (Calico's DataplaneWatchdogTimeout); an idle loop is alive.
// Readiness fails while any readiness check does, and the answer names
// each failing part with its cause: the datastore unreachable, the
// dataplane or routes not programmed (or failing), a security setting felix
// cannot honour. Transitions are logged once.
package health

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Loop tracks one loop's current iteration. A nil *Loop records nothing.
type Loop struct {
	busySince atomic.Int64 // unix nanos; 0 when idle
	now       func() time.Time
}

// NewLoop returns a Loop reading the given clock (time.Now if nil).
func NewLoop(now func() time.Time) *Loop {
	if now == nil {
		now = time.Now
	}
	return &Loop{now: now}
}

// Begin marks the start of an iteration, End its end.
func (l *Loop) Begin() {
	if l != nil {
		l.busySince.Store(l.now().UnixNano())
	}
}

func (l *Loop) End() {
	if l != nil {
		l.busySince.Store(0)
	}
}

// stuckFor is how long the current iteration has run (0 when idle).
func (l *Loop) stuckFor(now time.Time) time.Duration {
	b := l.busySince.Load()
	if b == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, b))
}

// Check is a readiness condition: ok, or why not.
type Check func() (ok bool, why string)

// Checker answers the probes.
type Checker struct {
	Now     func() time.Time
	Timeout time.Duration
	Loops   map[string]*Loop
	Ready   map[string]Check
	Log     *slog.Logger

	mu                sync.Mutex
	lastLive, lastRdy string // last failure reasons logged
}

// Live reports whether no loop is stuck.
func (c *Checker) Live() (bool, string) {
	now := time.Now()
	if c.Now != nil {
		now = c.Now()
	}
	var bad []string
	for name, l := range c.Loops {
		if d := l.stuckFor(now); d > c.Timeout {
			bad = append(bad, fmt.Sprintf("the %s loop has been stuck for %s (timeout %s)", name, d.Round(time.Second), c.Timeout))
		}
	}
	why := strings.Join(sorted(bad), "; ")
	c.logChange(&c.lastLive, why, "felix is not live", "felix is live again")
	return why == "", why
}

// Ready reports whether every readiness check passes.
func (c *Checker) ReadyNow() (bool, string) {
	var bad []string
	for name, chk := range c.Ready {
		if ok, why := chk(); !ok {
			bad = append(bad, name+": "+why)
		}
	}
	why := strings.Join(sorted(bad), "; ")
	c.logChange(&c.lastRdy, why, "felix is not ready", "felix is ready")
	return why == "", why
}

func (c *Checker) logChange(last *string, why, bad, good string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if why == *last || c.Log == nil {
		*last = why
		return
	}
	if why != "" {
		c.Log.Error(bad, "reason", why)
	} else {
		c.Log.Info(good)
	}
	*last = why
}

// Register adds /liveness and /readiness to mux (204 when healthy, 503
// with the reason otherwise).
func (c *Checker) Register(mux *http.ServeMux) {
	serve := func(probe func() (bool, string)) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if ok, why := probe(); !ok {
				http.Error(w, why, http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux.HandleFunc("/liveness", serve(c.Live))
	mux.HandleFunc("/readiness", serve(c.ReadyNow))
}

// Probe tracks whether a dependency answers: Run calls probe every
// interval (with a timeout of interval/2) and logs each failure at ERROR
// (so an unreachable datastore is visible in the log for as long as it
// lasts) and the recovery at INFO.
type Probe struct {
	Name     string
	Interval time.Duration
	Probe    func(ctx context.Context) error
	Log      *slog.Logger

	mu  sync.Mutex
	err error
	ran bool
}

// Check is the readiness check of p: ready once a probe succeeded and
// while the last one did.
func (p *Probe) Check() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ran {
		return false, "not checked yet"
	}
	if p.err != nil {
		return false, "unreachable: " + p.err.Error()
	}
	return true, ""
}

// Once runs one probe and records its result.
func (p *Probe) Once(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, p.Interval/2)
	err := p.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	was := p.err
	p.err, p.ran = err, true
	p.mu.Unlock()
	switch {
	case err != nil:
		p.Log.Error(p.Name+" unreachable", "error", err)
	case was != nil:
		p.Log.Info(p.Name + " reachable again")
	}
}

// Run probes until ctx ends.
func (p *Probe) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.Once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func sorted(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}
