// Command calico-node is the node agent of the calico-node DaemonSet (see
// package node/agent). With Calico's probe flags it checks a running
// agent instead and exits 0 (healthy) or 1, as Calico's:
//
//	calico-node -felix-live -bird-live
//	calico-node -felix-ready -bird-ready [-threshold-time 30s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/lib/calicolog"
	"github.com/tabbynet/tabby/node/agent"
	"github.com/tabbynet/tabby/node/health"
	"github.com/tabbynet/tabby/node/startup"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var p health.Probe
	fs := flag.NewFlagSet("calico-node", flag.ContinueOnError)
	fs.BoolVar(&p.FelixLive, "felix-live", false, "Run felix liveness checks")
	fs.BoolVar(&p.FelixReady, "felix-ready", false, "Run felix readiness checks")
	fs.BoolVar(&p.BIRDLive, "bird-live", false, "Run BIRD liveness checks")
	fs.BoolVar(&p.BIRDReady, "bird-ready", false, "Run BIRD readiness checks (IPv4 sessions)")
	fs.BoolVar(&p.BIRD6Live, "bird6-live", false, "Run BIRD liveness checks (BIRD 2 serves both IP versions)")
	fs.BoolVar(&p.BIRD6Ready, "bird6-ready", false, "Run BIRD readiness checks (IPv6 sessions)")
	fs.DurationVar(&p.Threshold, "threshold-time", 30*time.Second, "Threshold time for bird readiness")
	version := fs.Bool("v", false, "Display version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *version {
		fmt.Println(agent.Version)
		return 0
	}
	if p.FelixLive || p.FelixReady || p.BIRDLive || p.BIRDReady || p.BIRD6Live || p.BIRD6Ready {
		p.BaseURL = "http://" + agent.HealthAddr(os.Getenv)
		paths := agent.PathsFromEnv(os.Getenv)
		p.BIRDSocket = paths.BIRDSocket
		p.NodenameFile = os.Getenv("CALICO_NODENAME_FILE")
		if p.NodenameFile == "" {
			p.NodenameFile = startup.DefaultNodenameFile
		}
		if err := p.Run(context.Background()); err != nil {
			fmt.Println(err)
			return 1
		}
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "calico-node: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := agent.Run(ctx, agent.Options{}); err != nil {
		// Through the agent's logger (slog's default once Run began), as
		// Calico's last FATAL line.
		slog.Log(context.Background(), calicolog.LevelFatal, "calico-node stopped", "error", err)
		return 1
	}
	return 0
}
