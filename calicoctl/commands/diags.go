package commands

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// commandRunner runs a diagnostics command and returns what it printed;
// tests replace app.runCmd.
type commandRunner func(ctx context.Context, name string, args ...string) ([]byte, error)

func execRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

func (a *app) runner() commandRunner {
	if a.runCmd != nil {
		return a.runCmd
	}
	return execRunner
}

func (a *app) now() time.Time {
	if a.clock != nil {
		return a.clock()
	}
	return time.Now()
}

// nodeDiagCmd is one command node diags runs and the file its output goes to.
type nodeDiagCmd struct {
	info, cmd, file string
}

// nodeDiagCmds are Calico's node diags commands. Calico also sends felix
// SIGUSR1 for a stats dump; Tabby's felix does not handle SIGUSR1 (it
// would terminate), so that one is left out.
var nodeDiagCmds = []nodeDiagCmd{
	{"", "date", "date"},
	{"", "hostname", "hostname"},
	{"Dumping routes (IPv4)", "ip -4 route", "ipv4_route"},
	{"Dumping routes (IPv6)", "ip -6 route", "ipv6_route"},
	{"Dumping interface info (IPv4)", "ip -4 addr", "ipv4_addr"},
	{"Dumping interface info (IPv6)", "ip -6 addr", "ipv6_addr"},
	{"Dumping nftables", "nft -n -a list ruleset", "nft_ruleset"},
	{"Dumping iptables (IPv4)", "iptables-save -c", "ipv4_tables"},
	{"Dumping iptables (IPv6)", "ip6tables-save -c", "ipv6_tables"},
	{"Dumping ipsets", "ipset list", "ipsets"},
	{"Copying journal for calico-node.service", "journalctl -u calico-node.service --no-pager", "journalctl_calico_node"},
}

func newNodeDiagsCmd(a *app) *cobra.Command {
	var logDir string
	cmd := &cobra.Command{
		Use:   "diags",
		Short: "Gather a diagnostics bundle for a Calico node",
		Long: `Collect this host's routes, addresses, iptables/nftables rules, ipsets,
sockets, the calico-node journal, BIRD's protocols and the Calico logs under
--log-dir into diags-<time>.tar.gz (a "diagnostics" directory) in a new
temporary directory. Must run as root.`,
		Example: "  sudo calicoctl node diags --log-dir=/var/log/calico",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.nodeDiags(cmdContext(cmd), logDir)
		},
	}
	cmd.Flags().StringVar(&logDir, "log-dir", "/var/log/calico", "The directory containing Calico logs.")
	return cmd
}

func (a *app) nodeDiags(ctx context.Context, logDir string) error {
	if a.uid() != 0 {
		fmt.Fprintln(a.stdout, "Need super user privileges: Operation not permitted")
		return fmt.Errorf("node diags must run as root")
	}
	fmt.Fprintln(a.stdout, "Collecting diagnostics")
	tmp, err := os.MkdirTemp("", "calico")
	if err != nil {
		return fmt.Errorf("error creating temp directory to dump logs: %w", err)
	}
	fmt.Fprintln(a.stdout, "Using temp dir:", tmp)
	dir := filepath.Join(tmp, "diagnostics")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("error creating diagnostics directory: %w", err)
	}
	cmds := append([]nodeDiagCmd{}, nodeDiagCmds...)
	if _, err := exec.LookPath("netstat"); err == nil {
		cmds = append(cmds, nodeDiagCmd{"Dumping netstat", "netstat -a -n", "netstat"})
	} else {
		cmds = append(cmds, nodeDiagCmd{"Dumping ss", "ss -a -n", "ss"})
	}
	for _, s := range defaultBirdSockets {
		if _, err := os.Stat(s); err == nil {
			cmds = append(cmds, nodeDiagCmd{"Dumping BIRD protocols", "birdc -s " + s + " show protocols all", "bird_protocols"})
			break
		}
	}
	run := a.runner()
	for _, c := range cmds {
		if c.info != "" {
			fmt.Fprintln(a.stdout, c.info)
		}
		parts := strings.Fields(c.cmd)
		out, err := run(ctx, parts[0], parts[1:]...)
		if err != nil {
			fmt.Fprintf(a.stdout, "Failed to run command: %s\nError: %s\n", c.cmd, strings.TrimSpace(string(out)+" "+err.Error()))
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), out, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", c.file, err)
		}
	}
	switch st, err := os.Stat(logDir); {
	case err != nil:
		fmt.Fprintf(a.stdout, "Error copying log files: %v\n", err)
	case st.IsDir():
		fmt.Fprintln(a.stdout, "Copying Calico logs")
		if err := copyTree(logDir, filepath.Join(dir, "logs")); err != nil {
			fmt.Fprintf(a.stdout, "Error copying log files: %v\n", err)
		}
	default:
		fmt.Fprintf(a.stdout, "No logs found in %s; skipping log copying\n", logDir)
	}
	archive := filepath.Join(tmp, fmt.Sprintf("diags-%s.tar.gz", a.now().Format("20060102_150405")))
	if err := writeTarGz(archive, tmp, "diagnostics"); err != nil {
		fmt.Fprintf(a.stdout, "Error compressing the diagnostics: %v\n", err)
		return err
	}
	fmt.Fprintf(a.stdout, "\nDiags saved to %s\n", archive)
	fmt.Fprintln(a.stdout, "If required, you can upload the diagnostics bundle to a file sharing service.")
	return nil
}

func (a *app) uid() int {
	if a.getuid != nil {
		return a.getuid()
	}
	return os.Getuid()
}

// copyTree copies the regular files under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// writeTarGz archives base/dir (paths in the archive start with dir/)
// into archive.
func writeTarGz(archive, base, dir string) error {
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(filepath.Join(base, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(base, path)
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	for _, c := range []io.Closer{tw, zw, f} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove(archive)
		return fmt.Errorf("writing %s: %w", archive, err)
	}
	return nil
}
