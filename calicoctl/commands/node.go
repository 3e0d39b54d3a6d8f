package commands

import (
	"github.com/spf13/cobra"
)

// newNodeCmd is the node group: status (nodestatus.go), diags (diags.go),
// checksystem (checksystem.go).
func newNodeCmd(a *app) *cobra.Command {
	node := &cobra.Command{
		Use:   "node",
		Short: "Node-level commands: status, checksystem, diags",
		Example: `  calicoctl node status
  calicoctl node checksystem`,
	}
	node.AddCommand(newNodeStatusCmd(a), newNodeDiagsCmd(a), newNodeCheckSystemCmd(a))
	return node
}
