package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// ExecRunner runs commands with os/exec, inside the network namespace at
// NetnsPath (a /var/run/netns/<name> or /proc/<pid>/ns/net path) when set.
//
// A command for a namespace is forked from an OS thread that has entered
// that namespace (see exec_netns_linux.go), so the child starts in it
// without the extra exec that nsenter(1) costs. A command never runs in
// another namespace: when the path cannot be entered, Run fails. When
// NetnsPath names the namespace the caller is already in, the command is
// started directly.
//
// The zero value runs commands in the caller's namespace. ExecRunner is a
// value type and safe for concurrent use.
type ExecRunner struct {
	NetnsPath string
}

// Run implements Runner. A failed command's error names the command line
// (and the namespace, if any) and carries its stderr.
func (r ExecRunner) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr

	what := strings.Join(append([]string{name}, args...), " ")
	if r.NetnsPath != "" {
		what += " in network namespace " + r.NetnsPath
	}
	if err := r.start(ctx, cmd); err != nil {
		return nil, fmt.Errorf("running %s: %w", what, err)
	}
	if err := cmd.Wait(); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// Killed because the context ended: say so, so that callers
			// can tell a cancellation from a failure.
			return stdout.Bytes(), fmt.Errorf("running %s: %w (%w): %s", what, ctxErr, err, strings.TrimSpace(stderr.String()))
		}
		return stdout.Bytes(), fmt.Errorf("running %s: %w: %s", what, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// start starts cmd in r's namespace; only the fork needs the namespace,
// waiting for the child happens on the caller's goroutine.
func (r ExecRunner) start(ctx context.Context, cmd *exec.Cmd) error {
	if r.NetnsPath == "" {
		return cmd.Start()
	}
	same, err := inCallersNetns(r.NetnsPath)
	if err != nil {
		return err
	}
	if same {
		return cmd.Start()
	}
	return startInNetns(ctx, r.NetnsPath, cmd)
}
