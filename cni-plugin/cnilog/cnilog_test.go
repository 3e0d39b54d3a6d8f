package cnilog

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRotation: the file is rotated when a write would pass the maximum
// size, under Calico's naming; only the newest max_count rotated files
// younger than max_age are kept.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cni", "cni.log")
	clock := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	// An old rotated file past max_age, and a foreign file.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "cni", "cni-2026-10-01T00-00-00.000.log")
	for _, f := range []string{old, filepath.Join(dir, "cni", "other.log")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenRotating(path, 1, 30, 2, now)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	line := []byte(strings.Repeat("a", 400<<10) + "\n") // 400 KiB: 2 per MiB file
	for i := range 7 {
		clock = clock.Add(time.Second)
		if _, err := r.Write(line); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "cni"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"cni-2026-12-01T10-00-05.000.log", "cni-2026-12-01T10-00-07.000.log", "cni.log", "other.log"}
	if !slices.Equal(names, want) {
		t.Errorf("files %v, want %v (rotated at the writes at :03, :05, :07; the two newest kept; the 62-day-old one pruned)", names, want)
	}
	if st, _ := os.Stat(path); st.Size() != int64(len(line)) {
		t.Errorf("cni.log holds %d bytes, want one line", st.Size())
	}
}

// TestOpenLevelsAndFile: log_level as Calico's plugin reads it, lines to
// the file and stderr.
func TestOpenLevelsAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cni.log")
	var stderr strings.Builder
	s := FromConfig([]byte(`{"type":"calico","log_level":"debug","log_file_path":"` + path + `","log_file_max_size":5}`))
	if s.MaxSizeMB != 5 || s.FilePath != path {
		t.Fatalf("settings %+v", s)
	}
	log, closeLog := Open(s, "cni-plugin", false, &stderr, nil)
	log.Debug("a debug line")
	closeLog()
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "a debug line") || !strings.Contains(stderr.String(), "a debug line") {
		t.Errorf("file %q stderr %q", b, stderr.String())
	}
	for lvl, debug := range map[string]bool{"": false, "info": false, "warning": false, "error": false, "DEBUG": true} {
		var out strings.Builder
		l, c := Open(Settings{Level: lvl}, "cni-plugin", false, &out, nil)
		l.Debug("d")
		l.Info("i")
		c()
		if strings.Contains(out.String(), ": d\n") != debug || (lvl == "error") == strings.Contains(out.String(), ": i\n") {
			t.Errorf("log_level %q: %q", lvl, out.String())
		}
	}
}
