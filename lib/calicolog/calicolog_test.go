package calicolog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCalicoFormat: a line is Calico's layout, word for word but the
// time: level, pid, component/file line, message, sorted attributes each
// once, strings quoted, errors and durations as text.
func TestCalicoFormat(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(&buf, Options{Component: "confd", pid: 1234}))
	log = log.With("node", "node1", "component", "confd")
	log.Info("confd starting", "node", "node1", "took", 1500*time.Millisecond, "error", errors.New("boom"), "n", 5, "ok", true)
	line := strings.TrimSuffix(buf.String(), "\n")
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[INFO\]\[1234\] confd/calicolog_test\.go \d+: confd starting error=boom n=5 node="node1" ok=true took=1\.5s$`)
	if !re.MatchString(line) {
		t.Fatalf("line %q\ndoes not match %s", line, re)
	}
	if !LinePattern().MatchString(line) {
		t.Fatalf("LinePattern does not match %q", line)
	}
	if strings.Count(line, "node=") != 1 {
		t.Errorf("a key repeated: %q", line)
	}
}

// TestLevelsComponentsGroups: Calico's level names; a component attribute
// renames the component without being printed; groups flatten to
// "group.key"; records below the level are dropped.
func TestLevelsComponentsGroups(t *testing.T) {
	var buf bytes.Buffer
	lv := new(slog.LevelVar)
	lv.Set(LevelTrace)
	base := slog.New(New(&buf, Options{Component: "calico-node", Level: lv}))
	base.Log(nil, LevelTrace, "t")
	base.Debug("d")
	base.Warn("w")
	base.Error("e")
	base.Log(nil, LevelFatal, "f")
	base.With("component", "felix").WithGroup("dp").Info("grouped", "sets", 3, slog.Group("ipv4", "chains", 2))
	lv.Set(slog.LevelInfo)
	base.Debug("dropped")
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []struct{ level, comp, tail string }{
		{"TRACE", "calico-node", "t"}, {"DEBUG", "calico-node", "d"}, {"WARNING", "calico-node", "w"},
		{"ERROR", "calico-node", "e"}, {"FATAL", "calico-node", "f"}, {"INFO", "felix", "grouped dp.ipv4.chains=2 dp.sets=3"},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		m := LinePattern().FindStringSubmatch(l)
		if m == nil || m[2] != want[i].level || m[4] != want[i].comp || m[7] != want[i].tail {
			t.Errorf("line %d %q: want level %s component %s message %q", i, l, want[i].level, want[i].comp, want[i].tail)
		}
	}
}

// TestJSON: the JSON option writes one JSON object per line with Calico's
// level names and the caller.
func TestJSON(t *testing.T) {
	var buf bytes.Buffer
	slog.New(New(&buf, Options{JSON: JSONFromEnv(func(string) string { return "json" })})).Warn("hello", "k", "v")
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	if m["level"] != "WARNING" || m["msg"] != "hello" || m["k"] != "v" || m["source"] == nil {
		t.Errorf("JSON line %v", m)
	}
	if JSONFromEnv(func(string) string { return "" }) {
		t.Error("JSON without TABBY_LOG_FORMAT")
	}
}
