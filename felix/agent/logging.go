package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/tabbynet/tabby/lib/calicolog"
)

// Calico's severities beyond slog's: TRACE below DEBUG, FATAL above ERROR.
const (
	LevelTrace = calicolog.LevelTrace
	LevelFatal = calicolog.LevelFatal
)

// calicoLevel maps a Calico severity (TRACE ... FATAL, "" = off) to a
// slog level.
func calicoLevel(sev string) slog.Level {
	switch strings.ToUpper(sev) {
	case "TRACE":
		return LevelTrace
	case "DEBUG":
		return slog.LevelDebug
	case "INFO":
		return slog.LevelInfo
	case "WARNING", "WARN":
		return slog.LevelWarn
	case "ERROR":
		return slog.LevelError
	case "FATAL":
		return LevelFatal
	}
	return LevelFatal + 100 // off
}

// logOutputs are felix's log destinations, screen (stderr) and file
// (LogFilePath), each at its own level, changeable live.
type logOutputs struct {
	screen, file slog.LevelVar
	f            *os.File
}

// newLogger returns a logger writing to stderr at screenSev and, when
// path is not "", to the file at fileSev, in Calico's log line format (or
// JSON lines when json is set). A file that cannot be opened is reported
// and left out (the screen still logs).
func newLogger(stderr io.Writer, screenSev, path, fileSev string, json bool) (*slog.Logger, *logOutputs, error) {
	out := &logOutputs{}
	out.screen.Set(calicoLevel(screenSev))
	out.file.Set(calicoLevel(fileSev))
	hs := []slog.Handler{calicolog.New(stderr, calicolog.Options{Component: "felix", Level: &out.screen, JSON: json})}
	var ferr error
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			ferr = fmt.Errorf("creating the log directory: %w", err)
		} else if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			ferr = fmt.Errorf("opening the log file: %w", err)
		} else {
			out.f = f
			hs = append(hs, calicolog.New(f, calicolog.Options{Component: "felix", Level: &out.file, JSON: json}))
		}
	}
	return slog.New(fanout(hs)), out, ferr
}

func (o *logOutputs) Close() error {
	if o == nil || o.f == nil {
		return nil
	}
	return o.f.Close()
}

// fanout sends each record to every handler that wants its level.
type fanout []slog.Handler

func (h fanout) Enabled(ctx context.Context, l slog.Level) bool {
	for _, x := range h {
		if x.Enabled(ctx, l) {
			return true
		}
	}
	return false
}

func (h fanout) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, x := range h {
		if x.Enabled(ctx, r.Level) {
			errs = append(errs, x.Handle(ctx, r.Clone()))
		}
	}
	return errors.Join(errs...)
}

func (h fanout) WithAttrs(as []slog.Attr) slog.Handler {
	out := make(fanout, len(h))
	for i, x := range h {
		out[i] = x.WithAttrs(as)
	}
	return out
}

func (h fanout) WithGroup(name string) slog.Handler {
	out := make(fanout, len(h))
	for i, x := range h {
		out[i] = x.WithGroup(name)
	}
	return out
}
