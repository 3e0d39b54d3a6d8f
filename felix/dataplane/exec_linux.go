package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// ExecRunner runs commands with os/exec, inside the network namespace at
// NetnsPath (a /var/run/netns/<name> or /proc/<pid>/ns/net path) when set,
// through nsenter so that no Go thread ever changes namespace.
type ExecRunner struct {
	NetnsPath string
}

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	full := append([]string{name}, args...)
	if r.NetnsPath != "" {
		full = append([]string{"nsenter", "--net=" + r.NetnsPath, "--"}, full...)
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("running %s: %w: %s", strings.Join(full, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
