// Package epstatus writes Calico's endpoint status files: one empty file
// per local workload endpoint, in <EndpointStatusPathPrefix>/endpoint-status,
// created once the dataplane has programmed that endpoint's policy and
// removed when the endpoint goes. The CNI plugin (policy_setup_timeout_seconds,
// endpoint_status_dir) waits for the file before returning from ADD, so a
// pod does not run before its policy is in place.
//
// The daemon says which endpoints a ruleset generation holds (Desired);
// the dataplane says which generation it has applied (Applied). A file is
// written only when the generation that first held its endpoint has been
// applied.
package epstatus

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// DirName is the directory under the prefix that holds the files.
const DirName = "endpoint-status"

// Filename is the status file name of a workload endpoint, as Calico's
// names.WorkloadEndpointKeyToStatusFilename: the path-escaped
// orchestrator, workload and endpoint IDs separated by spaces. The
// workload ID is "<namespace>/<pod>" for a Kubernetes pod,
// "<namespace>/<workload>" otherwise (as felix's endpoint IDs).
func Filename(wep *v3.WorkloadEndpoint) string {
	workload := wep.Spec.Workload
	if wep.Spec.Orchestrator == "k8s" && wep.Spec.Pod != "" {
		workload = wep.Spec.Pod
	}
	if wep.Namespace != "" {
		workload = wep.Namespace + "/" + workload
	}
	return strings.Join([]string{url.PathEscape(wep.Spec.Orchestrator), url.PathEscape(workload), url.PathEscape(wep.Spec.Endpoint)}, " ")
}

// Reporter keeps the status directory in agreement. Desired and Applied
// may be called from any goroutine; Run owns the file system work.
type Reporter struct {
	dir string
	log *slog.Logger

	mu      sync.Mutex
	since   map[string]uint64 // desired file -> generation that first held it
	applied uint64
	started bool
	kick    chan struct{}

	written map[string]bool // Run's view of the directory
}

// NewReporter writes into <prefix>/endpoint-status.
func NewReporter(prefix string, log *slog.Logger) *Reporter {
	if log == nil {
		log = slog.Default()
	}
	return &Reporter{dir: filepath.Join(prefix, DirName), log: log, since: map[string]uint64{}, kick: make(chan struct{}, 1)}
}

// Dir is the directory the files are written to.
func (r *Reporter) Dir() string { return r.dir }

// Desired records the endpoints (status file names) of ruleset
// generation gen.
func (r *Reporter) Desired(gen uint64, names []string) {
	r.mu.Lock()
	next := make(map[string]uint64, len(names))
	for _, n := range names {
		if g, ok := r.since[n]; ok {
			next[n] = g
		} else {
			next[n] = gen
		}
	}
	r.since = next
	r.started = true
	r.mu.Unlock()
	r.poke()
}

// Applied records that the dataplane has programmed generation gen.
func (r *Reporter) Applied(gen uint64) {
	r.mu.Lock()
	if gen > r.applied {
		r.applied = gen
	}
	r.mu.Unlock()
	r.poke()
}

func (r *Reporter) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run reconciles the directory on every change (and retries failures
// with backoff) until ctx ends.
func (r *Reporter) Run(ctx context.Context) error {
	var retry <-chan time.Time
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-retry:
		}
		retry = nil
		if err := r.Sync(); err != nil {
			r.log.Warn("endpoint status files: retrying", "error", err, "in", backoff)
			retry = time.After(backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// Sync writes the files of programmed endpoints and removes those of
// endpoints that are gone (nothing before the first Desired: a restarted
// felix does not remove files it has not yet judged).
func (r *Reporter) Sync() error {
	r.mu.Lock()
	if !r.started {
		r.mu.Unlock()
		return nil
	}
	want := map[string]bool{}
	for n, g := range r.since {
		if g <= r.applied {
			want[n] = true
		}
	}
	desired := make(map[string]bool, len(r.since))
	for n := range r.since {
		desired[n] = true
	}
	r.mu.Unlock()

	if r.written == nil {
		if err := os.MkdirAll(r.dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", r.dir, err)
		}
		ents, err := os.ReadDir(r.dir)
		if err != nil {
			return fmt.Errorf("reading %s: %w", r.dir, err)
		}
		r.written = map[string]bool{}
		for _, e := range ents {
			r.written[e.Name()] = true
		}
	}
	var errs []error
	for n := range want {
		if r.written[n] {
			continue
		}
		f, err := os.Create(filepath.Join(r.dir, n))
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("writing status file %q: %w", n, err))
			continue
		}
		r.written[n] = true
	}
	for n := range r.written {
		if desired[n] {
			continue // still there, maybe not yet programmed again
		}
		if err := os.Remove(filepath.Join(r.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing status file %q: %w", n, err))
			continue
		}
		delete(r.written, n)
	}
	return errors.Join(errs...)
}
