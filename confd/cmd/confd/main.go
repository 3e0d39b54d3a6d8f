// Command confd keeps a running BIRD 2's configuration in step with the
// Calico BGP resources of the datastore, for one node, as a process of its
// own (calico-node runs the same in-process): see confd/agent.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tabbynet/tabby/confd/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := agent.Run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "confd:", err)
		os.Exit(1)
	}
}
