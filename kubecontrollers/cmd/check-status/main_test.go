package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/kubecontrollers/status"
)

func TestCheckStatus(t *testing.T) {
	file := filepath.Join(t.TempDir(), "status.json")
	var out bytes.Buffer
	if code := run([]string{"-l", "-f", file}, &out); code != 1 || !strings.Contains(out.String(), "Failed to read status file") {
		t.Fatalf("no file: %d %q", code, out.String())
	}
	s := status.New(file)
	s.SetReady("CalicoDatastore", false, "Error verifying datastore: down")
	out.Reset()
	if code := run([]string{"-r", "-f", file}, &out); code != 1 || !strings.Contains(out.String(), "down") {
		t.Fatalf("not ready: %d %q", code, out.String())
	}
	s.SetReady("CalicoDatastore", true, "")
	for _, flag := range []string{"-l", "-r", "--live", "--ready"} {
		out.Reset()
		if code := run([]string{flag, "--file", file}, &out); code != 0 || out.String() != "Ready\n" {
			t.Fatalf("%s ready: %d %q", flag, code, out.String())
		}
	}
	out.Reset()
	if code := run(nil, &out); code != 1 || !strings.Contains(out.String(), "No command specified") {
		t.Fatalf("no flag: %d %q", code, out.String())
	}
}
