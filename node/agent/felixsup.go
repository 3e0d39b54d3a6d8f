package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	felixagent "github.com/tabbynet/tabby/felix/agent"
)

// felixRestartPause is the least time between two starts of felix, as
// runit's (runsv waits a second before it starts a service that exited
// within a second of its start): a setting flapping in the datastore
// does not spin felix.
const felixRestartPause = time.Second

// superviseFelix runs felix (run) in calico-node's process and starts it
// again when it stops to apply a setting it reads only at start
// (felixagent.ErrConfigChanged), as Calico's runit restarts felix inside
// the calico-node container: BIRD, confd, the health endpoint and the
// rest of calico-node carry on, and the dataplane stays programmed
// between the runs (felix leaves it in place when it stops). Between the
// runs felix's parts are not ready (health). Any other error of felix is
// calico-node's failure (returned). run must have stopped everything it
// started when it returns (felixagent.Run waits for its goroutines and
// shuts its servers down).
func superviseFelix(ctx context.Context, run func(context.Context) error, health *felixHealth, log *slog.Logger) error {
	for starts := 1; ; starts++ {
		started := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, felixagent.ErrConfigChanged) {
			return err
		}
		health.stopped("felix restarting: " + err.Error())
		log.Warn("felix stopped to apply changed settings; restarting it in calico-node's process", "reason", err.Error(), "starts", starts)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(felixRestartPause - time.Since(started)):
		}
	}
}
