// Command felix is the node agent's policy path as a process of its own
// (calico-node runs the same in-process): see felix/agent for what it does
// and how it is configured.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tabbynet/tabby/felix/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := agent.Run(ctx, agent.Options{Getenv: os.Getenv})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "felix:", err)
		os.Exit(1)
	}
}
