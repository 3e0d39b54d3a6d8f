// Package calicolog is the components' log handler: log/slog records
// written in Calico's log line format (Calico's lib/logrusr Formatter),
// which log pipelines built for Calico parse:
//
//	2026-12-04 10:11:12.345 [INFO][1234] felix/daemon.go 123: msg key="value" n=5
//
// local time to the millisecond, the level (TRACE, DEBUG, INFO, WARNING,
// ERROR, FATAL), the process id, the component and the caller's file base
// name and line, the message, then the attributes sorted by key, each key
// once (the last value given wins, as in logrus's fields), strings quoted,
// errors and Stringers as their text. A "component" attribute names the
// component instead of Options.Component (calico-node's parts share one
// handler) and is not printed. JSON (TABBY_LOG_FORMAT=json) writes slog's
// JSON lines instead, with the caller as "source".
package calicolog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Calico's severities beyond slog's: TRACE below DEBUG, FATAL above ERROR.
const (
	LevelTrace = slog.Level(-8)
	LevelFatal = slog.Level(12)
)

// FormatEnv is the environment variable choosing the format: "json" for
// JSON lines; anything else (or unset) for Calico's.
const FormatEnv = "TABBY_LOG_FORMAT"

// TimeFormat is Calico's timestamp layout.
const TimeFormat = "2006-01-02 15:04:05.000"

// LinePattern matches a line in Calico's format (what tests and log
// pipelines parse): time, level, pid, component/file, line, message.
//
// Compiled on first use: the CNI plugin links this package into a
// process per pod, which should not pay for a regexp only tests use.
var LinePattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) \[(TRACE|DEBUG|INFO|WARNING|ERROR|FATAL|PANIC)\]\[(\d+)\] (?:([a-z0-9-]+)/)?([\w.-]+\.go|<nil>) (\d+|<nil>): (.*)$`)
})

// Options configure a handler.
type Options struct {
	// Component prefixes the file name ("felix" gives felix/daemon.go);
	// none when empty.
	Component string
	// Level is the minimum level written (INFO when nil).
	Level slog.Leveler
	// JSON writes slog's JSON lines instead of Calico's format.
	JSON bool
	// pid is the process id written (os.Getpid() when 0; tests set it).
	pid int
}

// JSONFromEnv reports whether getenv asks for JSON lines (FormatEnv).
func JSONFromEnv(getenv func(string) string) bool {
	return strings.EqualFold(strings.TrimSpace(getenv(FormatEnv)), "json")
}

// New returns a handler writing to w.
func New(w io.Writer, o Options) slog.Handler {
	if o.Level == nil {
		o.Level = slog.LevelInfo
	}
	if o.JSON {
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: o.Level, AddSource: true, ReplaceAttr: jsonLevels})
	}
	if o.pid == 0 {
		o.pid = os.Getpid()
	}
	return &handler{out: &output{w: w}, opts: o, component: o.Component}
}

// LevelName is Calico's (logrus's) name of a level.
func LevelName(l slog.Level) string {
	switch {
	case l <= LevelTrace:
		return "TRACE"
	case l < slog.LevelInfo:
		return "DEBUG"
	case l < slog.LevelWarn:
		return "INFO"
	case l < slog.LevelError:
		return "WARNING"
	case l < LevelFatal:
		return "ERROR"
	}
	return "FATAL"
}

func jsonLevels(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok {
			a.Value = slog.StringValue(LevelName(l))
		}
	}
	return a
}

// output serialises writes of whole lines to one writer.
type output struct {
	mu sync.Mutex
	w  io.Writer
}

// handler writes Calico's format. attrs are those of WithAttrs (already
// prefixed with their groups), in order; group is the current group
// prefix ("a.b.").
type handler struct {
	out       *output
	opts      Options
	component string
	attrs     []slog.Attr
	group     string
}

func (h *handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.opts.Level.Level() }

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		if h.group == "" && a.Key == "component" {
			c.component = a.Value.String()
			continue
		}
		c.attrs = appendFlat(c.attrs, h.group, a)
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.group = h.group + name + "."
	return &c
}

func (h *handler) Handle(_ context.Context, r slog.Record) error {
	attrs := slices.Clone(h.attrs)
	component := h.component
	r.Attrs(func(a slog.Attr) bool {
		if h.group == "" && a.Key == "component" {
			component = a.Value.String()
			return true
		}
		attrs = appendFlat(attrs, h.group, a)
		return true
	})
	var b bytes.Buffer
	b.WriteString(r.Time.Format(TimeFormat))
	fmt.Fprintf(&b, " [%s][%d] ", LevelName(r.Level), h.opts.pid)
	if component != "" {
		b.WriteString(component)
		b.WriteByte('/')
	}
	file, line := caller(r.PC)
	b.WriteString(file)
	b.WriteByte(' ')
	b.WriteString(line)
	b.WriteString(": ")
	b.WriteString(r.Message)
	writeAttrs(&b, attrs)
	b.WriteByte('\n')
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	_, err := h.out.w.Write(b.Bytes())
	return err
}

// caller is the base name and line of pc's source ("<nil>" when unknown,
// as Calico's).
func caller(pc uintptr) (file, line string) {
	if pc == 0 {
		return "<nil>", "<nil>"
	}
	f, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	if f.File == "" {
		return "<nil>", "<nil>"
	}
	return path.Base(f.File), strconv.Itoa(f.Line)
}

// appendFlat appends a, its key prefixed with group; a group attribute's
// members are appended one by one ("g.key"); empty attributes are dropped.
func appendFlat(out []slog.Attr, group string, a slog.Attr) []slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return out
	}
	if a.Value.Kind() == slog.KindGroup {
		prefix := group
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			out = appendFlat(out, prefix, m)
		}
		return out
	}
	a.Key = group + a.Key
	return append(out, a)
}

// writeAttrs writes " key=value" for each key once (the last value wins),
// sorted by key.
func writeAttrs(b *bytes.Buffer, attrs []slog.Attr) {
	last := make(map[string]slog.Value, len(attrs))
	keys := make([]string, 0, len(attrs))
	for _, a := range attrs {
		if _, seen := last[a.Key]; !seen {
			keys = append(keys, a.Key)
		}
		last[a.Key] = a.Value
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		writeValue(b, last[k])
	}
}

// writeValue writes v as Calico's formatter writes a logrus field.
func writeValue(b *bytes.Buffer, v slog.Value) {
	switch v.Kind() {
	case slog.KindString:
		b.WriteString(strconv.Quote(v.String()))
	case slog.KindInt64:
		b.WriteString(strconv.FormatInt(v.Int64(), 10))
	case slog.KindUint64:
		b.WriteString(strconv.FormatUint(v.Uint64(), 10))
	case slog.KindFloat64:
		b.WriteString(strconv.FormatFloat(v.Float64(), 'g', -1, 64))
	case slog.KindBool:
		b.WriteString(strconv.FormatBool(v.Bool()))
	case slog.KindDuration:
		b.WriteString(v.Duration().String())
	case slog.KindTime:
		b.WriteString(v.Time().String())
	default:
		switch x := v.Any().(type) {
		case error:
			b.WriteString(x.Error())
		case fmt.Stringer:
			b.WriteString(x.String())
		case *string:
			if x == nil {
				b.WriteString("<nil>")
			} else {
				b.WriteByte('*')
				b.WriteString(strconv.Quote(*x))
			}
		default:
			fmt.Fprintf(b, "%#v", x)
		}
	}
}
