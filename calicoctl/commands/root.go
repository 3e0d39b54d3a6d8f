// Package commands implements calicoctl's verbs over the api/v3 types and
// the datastore client. Each verb is a cobra command in its own file;
// Execute is the entry point main calls. Everything a command touches
// outside itself (streams, environment, datastore) comes through app, so
// tests drive the real commands against real servers.
package commands

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// Version and GitRevision are set at build time with -ldflags
// "-X ...commands.Version=... -X ...commands.GitRevision=...".
var (
	Version     = "dev"
	GitRevision = "unknown"
)

// app carries what commands need from the outside world.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	configPath     string
	configExplicit bool
	// defaultConfig is --config's default (tests point it elsewhere).
	defaultConfig string
	// newClient builds the datastore client; replaced in tests.
	newClient func(dsconfig.Spec) (datastore.Client, error)
	// probe inspects the host for node checksystem; replaced in tests.
	probe func() systemProbe
	// birdc talks to BIRD for node status [default: the birdc binary].
	birdc birdCommand
	// procs lists the running processes for node status [default: /proc].
	procs processList

	// Global flags, as Calico's calicoctl has them.
	logLevel      string
	kubeContext   string
	allowMismatch bool
	// allowUnsupported: write security settings Tabby cannot honour
	// (--allow-unsupported of apply, create, replace, patch).
	allowUnsupported bool
	// datastoreType is the datastore connected to (Calico's error
	// messages differ between them).
	datastoreType string
	// version is this client's version, compared with the cluster's
	// (Version unless a test sets it).
	version string
	// logger writes at --log-level to stderr; setDefaultLogger also makes
	// it the process's slog default (the real binary, not tests).
	logger           *slog.Logger
	setDefaultLogger bool

	// For node and cluster diags; tests replace them.
	runCmd  commandRunner    // runs a diagnostics command [exec]
	clock   func() time.Time // names the bundle [time.Now]
	getuid  func() int       // root check [os.Getuid]
	workDir string           // where cluster diags writes its bundle ["."]
}

// Execute runs calicoctl with args, its datastore clients built from
// backends, and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer, backends dsconfig.Backends) int {
	return run(&app{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv, newClient: backends.New, defaultConfig: dsconfig.DefaultConfigFile, probe: realProbe, setDefaultLogger: true}, args)
}

func run(a *app, args []string) int {
	root := newRoot(a)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		// As Calico's calicoctl: the error alone, no "Error:" prefix.
		fmt.Fprintln(a.stderr, err)
		return 1
	}
	return 0
}

func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "calicoctl",
		Short: "Manage Tabby (Calico-compatible) networking resources",
		Long: `calicoctl manages projectcalico.org/v3 resources in the datastore Tabby
uses (etcd v3 or the Kubernetes API), with the verbs and flags of Calico's
calicoctl. The datastore comes from --config (a CalicoAPIConfig file,
default /etc/calico/calicoctl.cfg) and the environment: DATASTORE_TYPE,
ETCD_ENDPOINTS, KUBECONFIG, K8S_API_ENDPOINT.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			a.configExplicit = cmd.Flags().Changed("config")
			return a.applyGlobalFlags()
		},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.PersistentFlags().StringVarP(&a.configPath, "config", "c", a.defaultConfig, "path to the CalicoAPIConfig file")
	root.PersistentFlags().StringVarP(&a.logLevel, "log-level", "l", "panic", "Set the log level (panic, fatal, error, warn, info, debug)")
	root.PersistentFlags().StringVar(&a.kubeContext, "context", "", "The name of the kubeconfig context to use")
	root.PersistentFlags().BoolVar(&a.allowMismatch, "allow-version-mismatch", false, "Allow client and cluster versions mismatch")
	root.AddCommand(
		newCreateCmd(a), newApplyCmd(a), newReplaceCmd(a), newDeleteCmd(a),
		newGetCmd(a), newPatchCmd(a), newLabelCmd(a),
		newNodeCmd(a), newValidateCmd(), newVersionCmd(a),
		newIPAMCmd(a), newConvertCmd(a), newDatastoreCmd(a), newClusterCmd(a), newPolicyCmd(a), newFlowsCmd(a),
	)
	// Cobra's completion command (bash, zsh, fish, powershell), added now
	// rather than at Execute so it is configured like every other group.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" || c.Name() == "ipam" || c.Name() == "node" || c.Name() == "datastore" || c.Name() == "cluster" || c.Name() == "policy" {
			requireSubcommand(c)
		}
	}
	return root
}

// client loads the datastore configuration and connects, then refuses a
// cluster of another version unless --allow-version-mismatch (Calico's
// check, made by every command that uses the datastore).
func (a *app) client() (datastore.Client, error) {
	c, err := a.connect()
	if err != nil {
		return nil, err
	}
	if err := a.checkVersionMismatch(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// connect loads the datastore configuration and connects.
func (a *app) connect() (datastore.Client, error) {
	spec, err := dsconfig.Load(a.configPath, a.configExplicit, a.env)
	if err != nil {
		return nil, err
	}
	c, err := a.newClient(spec)
	if err != nil {
		return nil, fmt.Errorf("connecting to the %s datastore: %w", spec.DatastoreType, err)
	}
	a.datastoreType = spec.DatastoreType
	return c, nil
}
