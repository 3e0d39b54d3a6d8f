package plugin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAttempts(t *testing.T) {
	if !attemptsIn("").mayHold("h") {
		t.Fatal("no hint folder: every handle may hold addresses")
	}
	dir := t.TempDir()
	a := attemptsIn(dir)
	if !a.mayHold("h") {
		t.Fatal("no attempts folder yet: want the handle read")
	}
	if err := a.start("h"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "attempts")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("attempts folder: %v %v, want mode 0700", st, err)
	}
	if !a.mayHold("h") || a.mayHold("other") {
		t.Fatalf("after start(h): mayHold(h)=%v mayHold(other)=%v, want true, false", a.mayHold("h"), a.mayHold("other"))
	}
	if err := a.start("h"); err != nil {
		t.Fatalf("start twice: %v", err)
	}
	a.done("h")
	if a.mayHold("h") {
		t.Fatal("after done(h): want no mark")
	}
	a.done("h") // twice is fine
}
