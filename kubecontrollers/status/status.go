// Package status is kube-controllers' health, as Calico's: named readiness
// conditions ("Startup", "CalicoDatastore", "KubeAPIServer", ...) written
// to a JSON status file (default /status/status.json) that `check-status
// -l` / `-r` read for the Deployment's exec probes, and served over HTTP
// as /liveness and /readiness.
package status

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// DefaultFile is where Calico's kube-controllers writes its status.
const DefaultFile = "/status/status.json"

// Condition is one readiness condition (Calico's ConditionStatus).
type Condition struct {
	Ready  bool
	Reason string
}

// Status holds the conditions; every change is written to the file at
// once (atomically: a probe never reads half a file). Safe for concurrent
// use.
type Status struct {
	mu        sync.Mutex
	file      string
	Readiness map[string]Condition
	writeErr  error
}

// New returns a Status written to file ("" writes none).
func New(file string) *Status {
	return &Status{file: file, Readiness: map[string]Condition{}}
}

// SetReady sets one condition.
func (s *Status) SetReady(key string, ready bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.Readiness[key]; ok && prev.Ready == ready && prev.Reason == reason {
		return
	}
	s.Readiness[key] = Condition{Ready: ready, Reason: reason}
	s.writeErr = s.write()
}

// Ready says whether there is at least one condition and all are ready.
func (s *Status) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ready(s.Readiness)
}

// NotReady joins the reasons of the conditions that are not ready.
func (s *Status) NotReady() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return notReady(s.Readiness)
}

// WriteError is the last failure to write the status file, if any.
func (s *Status) WriteError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeErr
}

func ready(m map[string]Condition) bool {
	if len(m) == 0 {
		return false
	}
	for _, c := range m {
		if !c.Ready {
			return false
		}
	}
	return true
}

func notReady(m map[string]Condition) string {
	var out []string
	for k, c := range m {
		if !c.Ready {
			out = append(out, k+": "+c.Reason)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// write stores {"Readiness": {...}} as Calico's status file. Lock held.
func (s *Status) write() error {
	if s.file == "" {
		return nil
	}
	b, err := json.Marshal(struct{ Readiness map[string]Condition }{s.Readiness})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.file), 0o755); err != nil {
		return fmt.Errorf("status directory: %w", err)
	}
	tmp := s.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing status file: %w", err)
	}
	if err := os.Rename(tmp, s.file); err != nil {
		return fmt.Errorf("writing status file: %w", err)
	}
	return nil
}

// ReadFile reads a status file written by Status (or by Calico).
func ReadFile(file string) (ok bool, reasons string, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return false, "", err
	}
	var st struct{ Readiness map[string]Condition }
	if err := json.Unmarshal(b, &st); err != nil {
		return false, "", fmt.Errorf("status file %s: %w", file, err)
	}
	if len(st.Readiness) == 0 {
		return false, "no conditions reported yet", nil
	}
	return ready(st.Readiness), notReady(st.Readiness), nil
}

// Handler serves /liveness and /readiness: 200 when every condition is
// ready, 503 with the reasons otherwise (the same answer for both, as
// Calico's check-status gives for -l and -r).
func (s *Status) Handler() http.Handler {
	mux := http.NewServeMux()
	h := func(w http.ResponseWriter, _ *http.Request) {
		if s.Ready() {
			fmt.Fprintln(w, "Ready")
			return
		}
		http.Error(w, s.NotReady(), http.StatusServiceUnavailable)
	}
	mux.HandleFunc("/liveness", h)
	mux.HandleFunc("/readiness", h)
	return mux
}
