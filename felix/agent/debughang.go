package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/tabbynet/tabby/felix/dataplane"
)

// hangAfter returns a function that, once after has passed since start,
// blocks its caller until ctx ends (Calico's DebugSimulate*HangAfter: a
// stuck loop for the liveness probe to find). after 0: never.
func hangAfter(ctx context.Context, after time.Duration, what string, log *slog.Logger) func() {
	if after <= 0 {
		return func() {}
	}
	deadline := time.Now().Add(after)
	return func() {
		if time.Now().Before(deadline) {
			return
		}
		log.Warn("simulating a hang (DebugSimulate*HangAfter)", "loop", what)
		<-ctx.Done()
	}
}

// hangingRunner runs commands until hang blocks (the dataplane's hang).
type hangingRunner struct {
	dataplane.Runner
	hang func()
}

func (r hangingRunner) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	r.hang()
	return r.Runner.Run(ctx, name, args, stdin)
}
