package health

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// TestLivenessDetectsStalledLoop: an idle loop is live however long it
// idles; one stuck in an iteration past the timeout is not, and is
// logged; it is live again when the iteration ends.
func TestLivenessDetectsStalledLoop(t *testing.T) {
	clk := &clock{t: time.Unix(1000, 0)}
	var logs logBuf
	calc := NewLoop(clk.now)
	c := &Checker{Now: clk.now, Timeout: 90 * time.Second, Loops: map[string]*Loop{"calculation": calc, "dataplane": NewLoop(clk.now)},
		Log: slog.New(slog.NewTextHandler(&logs, nil))}
	mux := http.NewServeMux()
	c.Register(mux)
	clk.add(time.Hour)
	if code, _ := get(t, mux, "/liveness"); code != http.StatusNoContent {
		t.Fatalf("idle: %d", code)
	}
	calc.Begin()
	clk.add(89 * time.Second)
	if code, _ := get(t, mux, "/liveness"); code != http.StatusNoContent {
		t.Fatalf("busy within the timeout: %d", code)
	}
	clk.add(2 * time.Second)
	code, body := get(t, mux, "/liveness")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "calculation loop has been stuck") {
		t.Fatalf("stalled: %d %q", code, body)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "felix is not live") {
		t.Errorf("stall not logged: %s", logs.String())
	}
	calc.End()
	if code, _ := get(t, mux, "/liveness"); code != http.StatusNoContent {
		t.Fatalf("after the iteration ended: %d", code)
	}
}

// TestReadinessFollowsProbe: not ready before the first probe and while
// the datastore does not answer (each failure logged), ready again after.
func TestReadinessFollowsProbe(t *testing.T) {
	var logs logBuf
	var fail error = errors.New("context deadline exceeded")
	p := &Probe{Name: "datastore", Interval: time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Probe: func(context.Context) error { return fail }}
	c := &Checker{Ready: map[string]Check{"datastore": p.Check, "dataplane": func() (bool, string) { return true, "" }}}
	mux := http.NewServeMux()
	c.Register(mux)
	if code, _ := get(t, mux, "/readiness"); code != http.StatusServiceUnavailable {
		t.Fatalf("before any probe: %d", code)
	}
	p.Once(context.Background())
	code, body := get(t, mux, "/readiness")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "datastore: unreachable: context deadline exceeded") {
		t.Fatalf("datastore down: %d %q", code, body)
	}
	if !strings.Contains(logs.String(), "datastore unreachable") {
		t.Errorf("not logged: %s", logs.String())
	}
	fail = nil
	p.Once(context.Background())
	if code, _ := get(t, mux, "/readiness"); code != http.StatusNoContent {
		t.Fatalf("datastore back: %d", code)
	}
	if !strings.Contains(logs.String(), "datastore reachable again") {
		t.Errorf("recovery not logged: %s", logs.String())
	}
}
