package agent

import (
	"sync"

	felixhealth "github.com/tabbynet/tabby/felix/health"
	"github.com/tabbynet/tabby/node/health"
)

// felixParts are felix's readiness checks, each its own line on the
// health endpoint (felix/<part>) so that /readiness names the failing
// part: the datastore unreachable, the dataplane or routes failing to
// program, a security setting felix cannot honour.
var felixParts = []string{"datastore", "dataplane", "routes", "settings"}

// felixHealth is felix's part of the health endpoint: one component per
// loop (felix/calculation, felix/dataplane), each live while its loop
// beats, and one per readiness check (felix/dataplane doubles as both).
type felixHealth struct {
	a     *health.Aggregator
	calc  *health.Reporter
	parts map[string]*health.Reporter // fixed once made: read by the loops' heartbeats

	mu    sync.Mutex
	extra map[string]*health.Reporter // parts felix added
}

func newFelixHealth(a *health.Aggregator) *felixHealth {
	f := &felixHealth{a: a, calc: a.Register("felix/calculation", felixLivenessTimeout), parts: map[string]*health.Reporter{}}
	f.calc.SetReady(true, "")
	for _, p := range felixParts {
		timeout := felixLivenessTimeout
		if p != "dataplane" {
			timeout = 0 // no loop of its own
		}
		f.parts[p] = a.Register("felix/"+p, timeout)
		f.parts[p].SetReady(false, "felix starting")
	}
	return f
}

func (f *felixHealth) Heartbeat(loop string) {
	if loop == "dataplane" {
		f.parts["dataplane"].Heartbeat()
		return
	}
	f.calc.Heartbeat()
}

func (f *felixHealth) Ready(checks map[string]felixhealth.Check) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, chk := range checks {
		r, ok := f.parts[name]
		if !ok { // a part felix added: shown all the same, registered once
			if r, ok = f.extra[name]; !ok {
				r = f.a.Register("felix/"+name, 0)
				if f.extra == nil {
					f.extra = map[string]*health.Reporter{}
				}
				f.extra[name] = r
			}
		}
		r.SetReadyFunc(chk)
	}
}

// stopped makes every part not ready, saying why, while felix is down
// (between a stop and the next run's Ready): the stopped run's checks
// would otherwise still answer for a dataplane nobody programs.
func (f *felixHealth) stopped(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	notReady := func() (bool, string) { return false, why }
	for _, m := range []map[string]*health.Reporter{f.parts, f.extra} {
		for _, r := range m {
			r.SetReadyFunc(notReady)
		}
	}
}
