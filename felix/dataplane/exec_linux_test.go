package dataplane_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/dataplane"
)

// TestExecRunnerDirect: with no namespace a command runs in place, gets
// its stdin, and a failure names the command line and carries stderr
// while still returning stdout.
func TestExecRunnerDirect(t *testing.T) {
	ctx := context.Background()
	r := dataplane.ExecRunner{}
	out, err := r.Run(ctx, "cat", nil, []byte("rules\n"))
	if err != nil || string(out) != "rules\n" {
		t.Fatalf("cat: %q, %v; want the stdin back", out, err)
	}
	out, err = r.Run(ctx, "sh", []string{"-c", "echo out; echo boom >&2; exit 3"}, nil)
	if err == nil {
		t.Fatal("want an error from a command exiting 3")
	}
	for _, want := range []string{"running sh -c echo out; echo boom >&2; exit 3", "exit status 3", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if string(out) != "out\n" {
		t.Errorf("stdout of the failed command: %q, want %q", out, "out\n")
	}
	if _, err := r.Run(ctx, "no-such-binary-tabby", nil, nil); err == nil || !strings.Contains(err.Error(), "no-such-binary-tabby") {
		t.Errorf("missing binary: %v; want an error naming it", err)
	}
}

// TestExecRunnerDirectCancel: a cancelled context kills the command.
func TestExecRunnerDirectCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := dataplane.ExecRunner{}.Run(ctx, "sleep", []string{"30"}, nil)
	if err == nil {
		t.Fatal("want an error from a killed command")
	}
	// The error says the context ended, not only "signal: killed".
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q is not the context's", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancelled command took %v", d)
	}
}
