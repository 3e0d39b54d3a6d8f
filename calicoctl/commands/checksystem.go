package commands

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// systemProbe is what checksystem looks at; tests replace it.
type systemProbe struct {
	// output runs a command and returns its combined output.
	output func(name string, args ...string) (string, error)
	// moduleLoaded reports whether a kernel module is loaded or built in.
	moduleLoaded func(name string) bool
	kernel       func() string
}

func realProbe() systemProbe {
	return systemProbe{
		output: func(name string, args ...string) (string, error) {
			out, err := exec.Command(name, args...).CombinedOutput()
			return strings.TrimSpace(string(out)), err
		},
		moduleLoaded: func(name string) bool {
			_, err := os.Stat(filepath.Join("/sys/module", name))
			return err == nil
		},
		kernel: func() string {
			b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
			return strings.TrimSpace(string(b))
		},
	}
}

// requiredModules are the kernel features felix and the CNI use; many load
// on demand, so a missing one is a warning, not a failure.
var requiredModules = []string{"ip_tables", "ip6_tables", "ip_set", "xt_set", "xt_mark", "xt_multiport", "xt_conntrack", "ipip", "vxlan", "veth"}

type checkResult struct {
	item, status, detail string
	fatal                bool
}

func checkSystem(p systemProbe) []checkResult {
	var rs []checkResult
	rs = append(rs, checkResult{item: "kernel", status: "OK", detail: p.kernel()})
	if out, err := p.output("iptables", "--version"); err != nil {
		rs = append(rs, checkResult{item: "iptables", status: "MISSING", detail: "install iptables", fatal: true})
	} else {
		backend := "legacy"
		if strings.Contains(out, "nf_tables") {
			backend = "nft"
		}
		rs = append(rs, checkResult{item: "iptables", status: "OK", detail: out + ", backend " + backend})
	}
	for _, tool := range []struct{ name, arg, fix string }{
		{"iptables-restore", "--version", "install iptables"},
		{"ipset", "--version", "install ipset"},
		{"bird", "--version", "install bird2 (needed for BGP networking)"},
	} {
		out, err := p.output(tool.name, tool.arg)
		if err != nil {
			rs = append(rs, checkResult{item: tool.name, status: "MISSING", detail: tool.fix, fatal: tool.name != "bird"})
			continue
		}
		first, _, _ := strings.Cut(out, "\n")
		rs = append(rs, checkResult{item: tool.name, status: "OK", detail: first})
	}
	for _, m := range requiredModules {
		if p.moduleLoaded(m) {
			rs = append(rs, checkResult{item: "module " + m, status: "OK", detail: "loaded"})
		} else {
			rs = append(rs, checkResult{item: "module " + m, status: "WARN", detail: "not listed in /sys/module (built in, or loads on first use)"})
		}
	}
	return rs
}

func printChecks(w io.Writer, rs []checkResult) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	failed := 0
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.item, r.status, r.detail)
		if r.fatal {
			failed++
		}
	}
	tw.Flush()
	if failed > 0 {
		return fmt.Errorf("%d required component(s) missing: see above", failed)
	}
	fmt.Fprintln(w, "System meets the requirements to run Tabby.")
	return nil
}

// newNodeCheckSystemCmd is node checksystem.
func newNodeCheckSystemCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "checksystem",
		Short:   "Check this host has what Tabby needs (iptables, ipset, BIRD, kernel modules)",
		Example: "  calicoctl node checksystem",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printChecks(a.stdout, checkSystem(a.probe()))
		},
	}
}
