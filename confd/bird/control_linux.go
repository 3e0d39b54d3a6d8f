package bird

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Exec is the real Control: it runs the bird and birdc binaries.
type Exec struct {
	Bird   string // path of bird; "" = "bird" from PATH
	Birdc  string // path of birdc; "" = "birdc" from PATH
	Socket string // BIRD's control socket (bird -s)
}

func (e Exec) bin(p, def string) string {
	if p == "" {
		return def
	}
	return p
}

// Validate runs `bird -p -c path`.
func (e Exec) Validate(ctx context.Context, path string) error {
	out, err := exec.CommandContext(ctx, e.bin(e.Bird, "bird"), "-p", "-c", path).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); ok {
			return &ConfigError{Stage: "validate", Message: birdMessage(out)}
		}
		return fmt.Errorf("running bird -p: %w", err)
	}
	return nil
}

// Configure runs `birdc -s socket configure`. BIRD answers "Reconfigured" or
// "Reconfiguration in progress" on success; anything else (e.g. a parse
// error, with file:line:col) means the old configuration is still running.
func (e Exec) Configure(ctx context.Context) error {
	out, err := e.Command(ctx, "configure")
	s := string(out)
	if strings.Contains(s, "Reconfigured") || strings.Contains(s, "Reconfiguration in progress") ||
		strings.Contains(s, "Reconfiguration already in progress") {
		return nil
	}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return fmt.Errorf("running birdc configure: %w", err)
		}
	}
	return &ConfigError{Stage: "configure", Message: birdMessage(out)}
}

// Command runs one birdc command against the daemon's socket.
func (e Exec) Command(ctx context.Context, args ...string) ([]byte, error) {
	full := append([]string{"-s", e.Socket}, args...)
	return exec.CommandContext(ctx, e.bin(e.Birdc, "birdc"), full...).CombinedOutput()
}

// birdMessage drops birdc's banner and progress lines, keeping BIRD's verdict.
func birdMessage(out []byte) string {
	var keep []string
	for _, l := range strings.Split(string(bytes.TrimSpace(out)), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "BIRD ") && strings.HasSuffix(l, "ready.") ||
			strings.HasPrefix(l, "Reading configuration from") {
			continue
		}
		keep = append(keep, strings.TrimPrefix(l, "bird: "))
	}
	return strings.Join(keep, "; ")
}
