package plugin

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// phaseTimer prints how long each phase of a call took to stderr when
// TABBY_CNI_TIMING=1 (runtimes keep plugin stderr in their logs), to see
// where an ADD's time goes.
type phaseTimer struct {
	on    bool
	op    string
	start time.Time
	last  time.Time
	parts []string
}

func newPhaseTimer(op string) *phaseTimer {
	now := time.Now()
	t := &phaseTimer{on: os.Getenv("TABBY_CNI_TIMING") == "1", op: op, start: now, last: now}
	if !Started.IsZero() {
		t.note("since-main", now.Sub(Started))
	}
	return t
}

// Started is when the binary's main began (set by main), for the timing
// log: what parsing the call cost before the first phase.
var Started time.Time

func (t *phaseTimer) mark(phase string) {
	if !t.on {
		return
	}
	now := time.Now()
	t.parts = append(t.parts, fmt.Sprintf("%s=%.2fms", phase, float64(now.Sub(t.last).Microseconds())/1000))
	t.last = now
}

func (t *phaseTimer) done() {
	if !t.on {
		return
	}
	fmt.Fprintf(os.Stderr, "tabby-cni %s total=%.2fms %s\n", t.op, float64(time.Since(t.start).Microseconds())/1000, strings.Join(t.parts, " "))
}

// note records a phase that ran alongside others, measured by the caller.
func (t *phaseTimer) note(phase string, took time.Duration) {
	if t.on {
		t.parts = append(t.parts, fmt.Sprintf("(%s=%.2fms)", phase, float64(took.Microseconds())/1000))
	}
}
