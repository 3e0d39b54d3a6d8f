package agent

import "sync"

// lifetime holds felix's background goroutines (route manager, address
// watcher, probes, collector) and what they use. Felix stops only once
// they have: a goroutine left running would keep the namespace it
// programs (an open handle on its path) and its sockets past the end of
// Run, and a handle closed under it would fail its last calls.
type lifetime struct {
	wg      sync.WaitGroup
	closers []func()
}

// Go runs f in the background; f must return once felix's context ends.
func (l *lifetime) Go(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// OnStop registers f to run once every background goroutine has
// returned, in the reverse order of registration.
func (l *lifetime) OnStop(f func()) { l.closers = append(l.closers, f) }

// end waits for the background goroutines (their context must already be
// cancelled) and then runs the stop functions.
func (l *lifetime) end() {
	l.wg.Wait()
	for i := len(l.closers) - 1; i >= 0; i-- {
		l.closers[i]()
	}
}
