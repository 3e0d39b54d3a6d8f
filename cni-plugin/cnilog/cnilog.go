// Package cnilog is the calico CNI plugin's log, with Calico's settings:
// log_level (debug, info, error; anything else is info, as Calico's
// plugin treats it), log_file_path (besides stderr; none when empty) and
// its rotation, log_file_max_size (MB, default 100), log_file_max_age
// (days, default 30) and log_file_max_count (rotated files kept, default
// 10). Rotated files are named as Calico's (lumberjack/timberjack):
// cni-2006-01-02T15-04-05.000.log beside cni.log; unlike Calico's they are
// not compressed. Each plugin call is a short process; many may write at
// once (appends are atomic; a rotation race leaves at most one extra
// rotated file).
package cnilog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tabbynet/tabby/lib/calicolog"
)

// Settings are the network configuration's logging keys.
type Settings struct {
	Level      string `json:"log_level"`
	FilePath   string `json:"log_file_path"`
	MaxSizeMB  int    `json:"log_file_max_size"`
	MaxAgeDays int    `json:"log_file_max_age"`
	MaxCount   int    `json:"log_file_max_count"`
}

// FromConfig reads the logging keys of a network configuration; a
// configuration that does not decode gives the defaults (the plugin
// reports that error itself).
func FromConfig(stdin []byte) Settings {
	var s Settings
	_ = json.Unmarshal(stdin, &s)
	return s
}

// Level is Calico's mapping of log_level.
func (s Settings) level() slog.Level {
	switch strings.ToLower(s.Level) {
	case "debug":
		return slog.LevelDebug
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Open returns the plugin's logger (stderr, and the file when set), in
// Calico's log line format with the given component (Calico's plugin
// writes "cni-plugin/") or as JSON lines, and a function closing the
// file. A file that cannot be opened is reported on stderr and left out.
func Open(s Settings, component string, json bool, stderr io.Writer, now func() time.Time) (*slog.Logger, func()) {
	opts := calicolog.Options{Component: component, Level: s.level(), JSON: json}
	w := stderr
	closer := func() {}
	if s.FilePath != "" {
		rf, err := OpenRotating(s.FilePath, s.MaxSizeMB, s.MaxAgeDays, s.MaxCount, now)
		if err != nil {
			fmt.Fprintf(stderr, "calico CNI: logging to stderr only: %v\n", err)
		} else {
			w = io.MultiWriter(stderr, rf)
			closer = func() { _ = rf.Close() }
		}
	}
	return slog.New(calicolog.New(w, opts)), closer
}

// backupTime is the timestamp format of rotated files (lumberjack's).
const backupTime = "2006-01-02T15-04-05.000"

// Rotating is a log file rotated by size, pruned by age and count.
type Rotating struct {
	path     string
	maxSize  int64
	maxAge   time.Duration
	maxCount int
	now      func() time.Time

	mu   sync.Mutex
	f    *os.File
	size int64
}

// OpenRotating opens path for appending (creating its folder), with
// Calico's defaults for the limits left 0.
func OpenRotating(path string, maxSizeMB, maxAgeDays, maxCount int, now func() time.Time) (*Rotating, error) {
	if maxSizeMB <= 0 {
		maxSizeMB = 100
	}
	if maxAgeDays <= 0 {
		maxAgeDays = 30
	}
	if maxCount <= 0 {
		maxCount = 10
	}
	if now == nil {
		now = time.Now
	}
	r := &Rotating{path: path, maxSize: int64(maxSizeMB) << 20, maxAge: time.Duration(maxAgeDays) * 24 * time.Hour, maxCount: maxCount, now: now}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating the CNI log folder: %w", err)
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Rotating) open() error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening the CNI log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("reading the CNI log's size: %w", err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

// Write appends p, rotating first when p would take the file past its
// maximum size.
func (r *Rotating) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return 0, fs.ErrClosed
	}
	if r.size > 0 && r.size+int64(len(p)) > r.maxSize {
		if err := r.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// rotate moves the file aside under its timestamped name, opens a new one
// and prunes the rotated files.
func (r *Rotating) rotate() error {
	_ = r.f.Close()
	r.f = nil
	ext := filepath.Ext(r.path)
	backup := strings.TrimSuffix(r.path, ext) + "-" + r.now().UTC().Format(backupTime) + ext
	if err := os.Rename(r.path, backup); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotating the CNI log: %w", err)
	}
	if err := r.open(); err != nil {
		return err
	}
	r.prune()
	return nil
}

// prune removes rotated files beyond maxCount (oldest first) or older
// than maxAge.
func (r *Rotating) prune() {
	dir, base := filepath.Dir(r.path), filepath.Base(r.path)
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type backup struct {
		name string
		t    time.Time
	}
	var backups []backup
	for _, e := range entries {
		stamp, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !strings.HasSuffix(stamp, ext) {
			continue
		}
		t, err := time.Parse(backupTime, strings.TrimSuffix(stamp, ext))
		if err != nil {
			continue
		}
		backups = append(backups, backup{e.Name(), t})
	}
	slices.SortFunc(backups, func(a, b backup) int { return b.t.Compare(a.t) }) // newest first
	cutoff := r.now().Add(-r.maxAge)
	for i, b := range backups {
		if i >= r.maxCount || b.t.Before(cutoff) {
			_ = os.Remove(filepath.Join(dir, b.name))
		}
	}
}

// Close closes the file.
func (r *Rotating) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
