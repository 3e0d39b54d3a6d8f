package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tabbynet/tabby/lab/cluster"
)

// e2eFlags registers `tabby-lab cluster e2e`'s flags.
func e2eFlags(fs *flag.FlagSet, o *cluster.E2EOptions, suite *string, kubeBin string) {
	fs.StringVar(&o.E2EBin, "e2e-bin", kubeBin, "folder of e2e.test and ginkgo (hack/build-kube-binaries.sh e2e)")
	fs.StringVar(suite, "suite", "netpol", "netpol (the NetworkPolicy e2e), netpol-sctp (its SCTP specs, on the VM nodes only) or network (the sig-network conformance specs): the default focus and skip")
	fs.StringVar(&o.Focus, "focus", "", "ginkgo focus: the specs to run (default: the suite's)")
	fs.StringVar(&o.Skip, "skip", "", "ginkgo skip: specs left out of the focus (default: the suite's)")
	fs.IntVar(&o.Procs, "procs", 1, "ginkgo processes running specs in parallel")
	fs.StringVar(&o.ReportDir, "report-dir", "", "where the reports and log go (default <state>/e2e-<time>)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "bound on the whole run (default 2h)")
}

// e2eSuite fills the focus and skip the flags left unset from the suite.
func e2eSuite(fs *flag.FlagSet, o *cluster.E2EOptions, suite string) error {
	sel, ok := cluster.E2ESuites()[suite]
	if !ok {
		return fmt.Errorf("e2e suite %q: use netpol, netpol-sctp or network", suite)
	}
	o.VMNodesOnly = cluster.E2ESuiteOnVMNodes(suite)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["focus"] {
		o.Focus = sel[0]
	}
	if !set["skip"] {
		o.Skip = sel[1]
	}
	return nil
}

// runE2E runs the upstream e2e tests against the cluster at state and
// prints their counts; failed specs make it fail.
func runE2E(ctx context.Context, state, bin, kubeBin string, o cluster.E2EOptions) error {
	c, err := cluster.Open(state, bin, kubeBin, os.Stdout)
	if err != nil {
		return err
	}
	o.Out = os.Stdout
	r, err := c.RunE2E(ctx, o)
	if err != nil {
		return err
	}
	fmt.Printf("report: %s\n", r.Report)
	for _, f := range r.Failures {
		fmt.Printf("FAILED %s\n", f)
	}
	fmt.Printf("e2e: %d specs not selected; duration %s\n", r.NotSelected, r.Duration.Round(time.Second))
	fmt.Println(r.Summary())
	if r.Failed > 0 {
		return fmt.Errorf("%d e2e specs failed", r.Failed)
	}
	if r.Passed == 0 {
		return fmt.Errorf("no e2e spec passed (focus %q)", o.Focus)
	}
	return nil
}
