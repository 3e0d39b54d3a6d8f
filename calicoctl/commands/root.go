// Package commands implements calicoctl's verbs over the api/v3 types (and,
// from the calicoctl issue on, the datastore client). Each verb is a cobra
// command in its own file; Execute is the entry point main calls.
package commands

import (
	"io"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X ...commands.Version=...".
var Version = "dev"

// Execute runs calicoctl with args and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		return 1
	}
	return 0
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "calicoctl",
		Short:         "Manage Tabby (Calico-compatible) networking resources",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newValidateCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the client version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Printf("Client Version:    %s\n", Version)
			return nil
		},
	}
}
