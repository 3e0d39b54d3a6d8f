package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLoggerScreenAndFile: screen and file each at their own severity,
// TRACE below DEBUG named as Calico's, levels changeable live; an
// unopenable file leaves the screen logging.
func TestLoggerScreenAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calico", "felix.log")
	var screen strings.Builder
	log, outs, err := newLogger(&screen, "WARNING", path, "TRACE", false)
	if err != nil {
		t.Fatal(err)
	}
	log.Log(context.Background(), LevelTrace, "t1")
	log.Info("i1")
	log.Warn("w1")
	outs.screen.Set(calicoLevel("Trace"))
	log.Log(context.Background(), LevelTrace, "t2")
	_ = outs.Close()
	file, _ := os.ReadFile(path)
	for _, c := range []struct {
		out, want string
		has       bool
	}{
		{screen.String(), `\[TRACE\]\S+ felix/logging_test.go \d+: t1`, false}, {screen.String(), `: i1`, false},
		{screen.String(), `\[WARNING\]\S+ felix/logging_test.go \d+: w1`, true},
		{screen.String(), `\[TRACE\]\S+ felix/logging_test.go \d+: t2`, true},
		{string(file), `\[TRACE\]\S+ felix/logging_test.go \d+: t1`, true}, {string(file), `\[INFO\]\S+ felix/logging_test.go \d+: i1`, true},
	} {
		if regexp.MustCompile(c.want).MatchString(c.out) != c.has {
			t.Errorf("%q in %q: want %v", c.want, c.out, c.has)
		}
	}
	if calicoLevel("") <= LevelFatal || calicoLevel("fatal") != LevelFatal || calicoLevel("Warning") != slog.LevelWarn {
		t.Error("severity mapping")
	}
	var s2 strings.Builder
	log, outs, err = newLogger(&s2, "INFO", "/proc/no/such/felix.log", "INFO", false)
	if err == nil {
		t.Error("an unopenable log file was not reported")
	}
	log.Info("still here")
	_ = outs.Close()
	if !strings.Contains(s2.String(), "still here") {
		t.Error("the screen stopped logging")
	}
}
