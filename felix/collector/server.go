package collector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Calico's local flow socket (felix/collector/local): Tabby's felix serves
// its flows there.
const (
	SocketDir  = "/var/run/calico/flows"
	SocketName = "flows.sock"
)

// Store keeps the flows of the last flushes (up to Max) and hands each
// flush to followers. It is the node's flow stream: `calicoctl flows` and
// an aggregator read it through Handler. Safe for concurrent use.
type Store struct {
	Max int

	mu        sync.Mutex
	flows     []Flow
	followers map[chan []Flow]struct{}
}

// NewStore returns a Store keeping up to max flows.
func NewStore(max int) *Store {
	return &Store{Max: max, followers: map[chan []Flow]struct{}{}}
}

// Publish adds one flush's flows. A follower too slow to take them is
// dropped (its stream ends; it can reconnect), never the node's work.
func (s *Store) Publish(flows []Flow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flows = append(s.flows, flows...)
	if over := len(s.flows) - s.Max; over > 0 {
		s.flows = append([]Flow(nil), s.flows[over:]...)
	}
	for ch := range s.followers {
		select {
		case ch <- flows:
		default:
			delete(s.followers, ch)
			close(ch)
		}
	}
}

// Snapshot returns the kept flows and, when follow, a channel of later
// flushes (closed when the follower is dropped) and a function to stop
// following.
func (s *Store) Snapshot(follow bool) ([]Flow, <-chan []Flow, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Flow(nil), s.flows...)
	if !follow {
		return out, nil, func() {}
	}
	ch := make(chan []Flow, 64)
	s.followers[ch] = struct{}{}
	return out, ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.followers[ch]; ok {
			delete(s.followers, ch)
			close(ch)
		}
	}
}

// Filter selects flows: by namespace (either end), pod (either end's
// name, "ns/name" or "name"), action (allow, deny; any case).
type Filter struct {
	Namespace, Pod, Action string
}

// Match says whether f passes the filter.
func (flt Filter) Match(f *Flow) bool {
	if flt.Namespace != "" && f.Source.Namespace != flt.Namespace && f.Dest.Namespace != flt.Namespace {
		return false
	}
	if flt.Action != "" && !strings.EqualFold(flt.Action, f.Action) {
		return false
	}
	if flt.Pod != "" {
		ns, name, scoped := strings.Cut(flt.Pod, "/")
		if !scoped {
			ns, name = "", flt.Pod
		}
		end := func(e Endpoint) bool {
			return e.Kind == "wep" && e.Name == name && (!scoped || e.Namespace == ns)
		}
		if !end(f.Source) && !end(f.Dest) {
			return false
		}
	}
	return true
}

// Handler serves GET /flows as JSON lines (one Flow a line): the kept
// flows matching ?namespace=&pod=&action=, and with ?follow=true every
// later flush's too, until the client goes away.
func (s *Store) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /flows", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		flt := Filter{Namespace: q.Get("namespace"), Pod: q.Get("pod"), Action: q.Get("action")}
		follow := q.Get("follow") == "true" || q.Get("follow") == "1"
		flows, ch, stop := s.Snapshot(follow)
		defer stop()
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		write := func(fs []Flow) error {
			for i := range fs {
				if flt.Match(&fs[i]) {
					if err := enc.Encode(&fs[i]); err != nil {
						return err
					}
				}
			}
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			return nil
		}
		if write(flows) != nil || ch == nil {
			return
		}
		for {
			select {
			case <-r.Context().Done():
				return
			case fs, ok := <-ch:
				if !ok || write(fs) != nil {
					return
				}
			}
		}
	})
	return mux
}

// Serve serves h on the Unix socket dir/flows.sock (replacing a stale
// one) until ctx ends.
func Serve(ctx context.Context, dir string, h http.Handler) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the flow socket's directory: %w", err)
	}
	path := filepath.Join(dir, SocketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing a stale flow socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listening on the flow socket: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving flows: %w", err)
	}
	return nil
}
