package syncserver

import (
	"context"
	"math/rand/v2"
	"time"
)

// The number of connections, as Calico's Typha governs it: a limit that
// rebalancing sets (SetMaxConns) from the replicas and nodes there are,
// enforced by dropping one connection at a time, whose client reconnects
// to another replica and resyncs without rewriting anything; and a
// graceful shutdown that drops connections one at a time.

// SetMaxConns sets the connection limit.
func (s *Server) SetMaxConns(n int) {
	if old := s.maxConns.Swap(int64(n)); old != int64(n) {
		s.cfg.Log.Info("New target number of connections", "oldMax", old, "newMax", n, "currentNum", s.Clients())
	}
}

func (s *Server) track(id uint64, cancel context.CancelFunc) {
	s.connsMu.Lock()
	s.conns[id] = cancel
	s.connsMu.Unlock()
}

func (s *Server) untrack(id uint64) {
	s.connsMu.Lock()
	delete(s.conns, id)
	s.connsMu.Unlock()
}

// dropOne closes a random connection; false when there is none.
func (s *Server) dropOne(reason string) bool {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	if len(s.conns) == 0 {
		return false
	}
	n := rand.IntN(len(s.conns))
	for id, cancel := range s.conns {
		if n--; n < 0 {
			s.cfg.Log.Info("Closing connection", "connID", id, "reason", reason)
			cancel()
			delete(s.conns, id)
			return true
		}
	}
	return false
}

// govern drops one connection every DropInterval (jittered by 10%) while
// there are more than the limit.
func (s *Server) govern(ctx context.Context) {
	d := s.cfg.DropInterval
	for {
		t := time.NewTimer(d - d/10 + rand.N(d/5+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if int64(s.Clients()) > s.maxConns.Load() && s.dropOne("re-balance load with other Typha instances") {
			s.m.dropped.Inc()
		}
	}
}

// drain drops the connections one at a time, spread over 95% of
// ShutdownTimeout and at most ShutdownMaxDropInterval apart; it returns
// when none is left or the timeout has passed.
func (s *Server) drain() {
	n := s.Clients()
	if s.cfg.ShutdownTimeout <= 0 || n == 0 {
		return
	}
	interval := min(s.cfg.ShutdownTimeout*95/100/time.Duration(n), s.cfg.ShutdownMaxDropInterval)
	s.cfg.Log.Info("Graceful shutdown: closing connections one at a time", "connections", n, "interval", interval)
	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for range tick.C {
		if !s.dropOne("graceful shutdown in progress") || s.Clients() <= 1 || time.Now().After(deadline) {
			return
		}
	}
}
