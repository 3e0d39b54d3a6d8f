package agent

import (
	"net/http"
	"strings"
	"sync"
)

// debugHandlers are the read models felix hands calico-node to serve on
// its health port (felix's endpoint report, /debug/endpoints): felix
// starts after the health endpoint, so they are added while it serves.
type debugHandlers struct {
	mu       sync.RWMutex
	handlers map[string]http.Handler
}

// Handle implements felix/agent.DebugHandler.
func (d *debugHandlers) Handle(pattern string, h http.Handler) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.handlers == nil {
		d.handlers = map[string]http.Handler{}
	}
	d.handlers[pattern] = h
}

// wrap serves the debug handlers under /debug/ and everything else with
// health (404 for a debug path nobody handles yet).
func (d *debugHandlers) wrap(health http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !strings.HasPrefix(req.URL.Path, "/debug/") {
			health.ServeHTTP(w, req)
			return
		}
		d.mu.RLock()
		h := d.handlers[req.URL.Path]
		d.mu.RUnlock()
		if h == nil {
			http.NotFound(w, req)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// felixPort is felix's view of calico-node's health endpoint: its health
// reporters and the debug handlers.
type felixPort struct {
	*felixHealth
	*debugHandlers
}
