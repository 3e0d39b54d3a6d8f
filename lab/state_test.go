package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// Down never removes a folder that holds no lab: --state may name any
// folder.
func TestDownRefusesAForeignFolder(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Down(dir); err == nil || !strings.Contains(err.Error(), "not removing") {
		t.Fatalf("down on a foreign folder: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("down removed a foreign file: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Down(empty); err != nil {
		t.Fatal(err)
	}
	if err := Down(filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("down with no folder: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, harness.PrefixFile), []byte("../../etc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Down(dir); err == nil {
		t.Fatal("down accepted a prefix file that is not a lab's")
	}
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := &State{Prefix: "tl00aa11", Datastore: DatastoreEtcd, Phase: "up", Model: DefaultModel(),
		Pods: []PodState{{Namespace: "x", Name: "a", IP: "10.200.0.1", Ports: DefaultPorts()}}}
	if err := writeState(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := readState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Prefix != s.Prefix || got.Pods[0].Key() != "x/a" || len(got.Model.Pods) != 9 {
		t.Fatalf("%+v", got)
	}
	if _, err := readState(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tabby-lab up") {
		t.Fatalf("no lab: %v", err)
	}
}
