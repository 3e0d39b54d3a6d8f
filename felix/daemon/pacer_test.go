package daemon

import (
	"testing"
	"time"
)

// TestPacer: an isolated change waits the debounce only; after a slow
// computation the next waits as long as it took; computations while the
// snapshot loads neither slow the next nor count as churn; sustained
// churn spaces computations by churnSpacing and ends when the churn does.
func TestPacer(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	p := &pacer{debounce: 2 * ms}
	if got := p.wait(at(0)); got != 2*ms {
		t.Fatalf("first wait %v, want the debounce", got)
	}
	p.done(at(0), at(40*ms), true) // took 40 ms
	if got := p.wait(at(50 * ms)); got != 30*ms {
		t.Errorf("wait 10 ms after a 40 ms computation = %v, want 30 ms (as long as it took)", got)
	}
	if got := p.wait(at(200 * ms)); got != 2*ms {
		t.Errorf("wait long after = %v, want the debounce", got)
	}
	// Loading the snapshot: no pause, no churn.
	p = &pacer{debounce: 2 * ms}
	for i := range 20 {
		p.done(at(time.Duration(i)*ms), at(time.Duration(i)*ms+ms/2), false)
	}
	if got := p.wait(at(20 * ms)); got != 2*ms || p.busy(at(20*ms)) {
		t.Errorf("after loading: wait %v busy %v, want the debounce and no churn", got, p.busy(at(20*ms)))
	}
	// Churn: churnCount computations of 1 ms, 5 ms apart.
	p = &pacer{debounce: 2 * ms}
	var end time.Time
	for i := range churnCount {
		start := at(time.Duration(i) * 5 * ms)
		end = start.Add(ms)
		if i < churnCount-1 && p.busy(start) {
			t.Fatalf("busy after %d computations, want %d first", i, churnCount)
		}
		p.done(start, end, true)
	}
	if got := p.wait(end); got != churnSpacing {
		t.Errorf("wait under churn %v, want %v", got, churnSpacing)
	}
	if later := end.Add(churnWindow); p.busy(later) || p.wait(later) != 2*ms {
		t.Errorf("churn not over %v after: busy %v wait %v", churnWindow, p.busy(later), p.wait(later))
	}
}
