// Command check-status is the exec probe of the kube-controllers
// Deployment, as Calico's: `check-status -l` (liveness) and `-r`
// (readiness) read kube-controllers' status file (-f, default
// /status/status.json) and exit 0 when every condition is ready, printing
// "Ready", else 1 with the reasons.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tabbynet/tabby/kubecontrollers/status"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout)) }

func run(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("check-status", flag.ContinueOnError)
	fs.SetOutput(out)
	file := fs.String("f", status.DefaultFile, "status file written by kube-controllers")
	fs.StringVar(file, "file", status.DefaultFile, "status file written by kube-controllers")
	ready := fs.Bool("r", false, "check readiness")
	fs.BoolVar(ready, "ready", false, "check readiness")
	live := fs.Bool("l", false, "check liveness")
	fs.BoolVar(live, "live", false, "check liveness")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(out, "Failed to parse flags")
		return 1
	}
	if !*ready && !*live {
		fmt.Fprintln(out, "No command specified to check-status")
		return 1
	}
	ok, reasons, err := status.ReadFile(*file)
	if err != nil {
		fmt.Fprintf(out, "Failed to read status file %s: %v\n", *file, err)
		return 1
	}
	if ok {
		fmt.Fprintln(out, "Ready")
		return 0
	}
	fmt.Fprintln(out, reasons)
	return 1
}
