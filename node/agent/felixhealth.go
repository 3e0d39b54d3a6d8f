package agent

import "github.com/tabbynet/tabby/node/health"

// felixHealth is felix's part of the health endpoint: one component per
// loop (felix/calculation, felix/dataplane), each live while its loop
// beats; felix/dataplane ready while the dataplane is in sync.
type felixHealth struct {
	calc, dp *health.Reporter
}

func newFelixHealth(a *health.Aggregator) *felixHealth {
	f := &felixHealth{calc: a.Register("felix/calculation", felixLivenessTimeout), dp: a.Register("felix/dataplane", felixLivenessTimeout)}
	f.calc.SetReady(true, "")
	f.dp.SetReady(false, "felix starting")
	return f
}

func (f *felixHealth) Heartbeat(loop string) {
	if loop == "dataplane" {
		f.dp.Heartbeat()
		return
	}
	f.calc.Heartbeat()
}

func (f *felixHealth) Ready(inSync func() bool) {
	f.dp.SetReadyFunc(func() (bool, string) {
		if inSync() {
			return true, ""
		}
		return false, "dataplane not in sync"
	})
}
