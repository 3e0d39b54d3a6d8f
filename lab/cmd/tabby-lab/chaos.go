package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tabbynet/tabby/lab/cluster"
)

// exitCode ends tabby-lab with the code and no message: what failed is
// already printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// chaosFlags registers `tabby-lab cluster chaos`'s flags.
func chaosFlags(fs *flag.FlagSet, o *cluster.ChaosOptions, faults *string) {
	fs.IntVar(&o.Pods, "pods", envInt("TABBY_CHAOS_PODS", 1000), "the churn's pod creations in all (each deleted again), spread over the faults")
	fs.DurationVar(&o.Outage, "outage", 30*time.Second, "how long the datastore (etcd, kube-apiserver) stays down")
	fs.DurationVar(&o.PowerOff, "power-off", 15*time.Second, "how long the node stays without power")
	fs.StringVar(faults, "faults", strings.Join(cluster.AllFaults(), ","), "faults to apply, in turn")
	fs.Int64Var(&o.Seed, "seed", 0, "the churn's random seed (default: the time)")
}

// runChaos runs the faults on the cluster at state and prints each
// fault's figures, then one line per invariant; a violated one (or a run
// that could not finish) makes it exit 1.
func runChaos(ctx context.Context, state, bin, kubeBin string, o cluster.ChaosOptions, faults string) error {
	c, err := cluster.Open(state, bin, kubeBin, os.Stdout)
	if err != nil {
		return err
	}
	o.Faults, o.Out = strings.Split(faults, ","), os.Stdout
	sum, runErr := c.Chaos(ctx, o)
	if runErr != nil {
		fmt.Printf("chaos run stopped: %v\n", runErr)
	}
	failed := runErr != nil
	for _, inv := range sum.Invariants() {
		fmt.Println(inv)
		failed = failed || !inv.OK
	}
	if failed {
		return exitCode(1)
	}
	return nil
}

func envInt(k string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(k), &n); err != nil || n <= 0 {
		return def
	}
	return n
}
