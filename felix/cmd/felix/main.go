// Command felix is the node agent's policy path as a process of its own
// (calico-node runs the same in-process): see felix/agent for what it does
// and how it is configured.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tabbynet/tabby/felix/agent"
	"github.com/tabbynet/tabby/lib/calicolog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := agent.Run(ctx, agent.Options{Getenv: os.Getenv})
	stop()
	if err != nil {
		// Through felix's logger (slog's default once Run made it), as
		// Calico's last FATAL line.
		slog.Log(context.Background(), calicolog.LevelFatal, "felix stopped", "error", err)
		os.Exit(1)
	}
}
