package commands

import (
	"github.com/spf13/cobra"
)

// newIPAMCmd is the ipam group: show (ipam_show.go), check, release,
// configure and split, each in its own ipam_<command>.go.
func newIPAMCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "ipam",
		Short: "IP address management: show, check, release, configure",
		Long: `Inspect and repair Calico IPAM: how full each pool and block is, who
holds an address, which allocations have leaked (their pod or node is gone),
and the cluster-wide IPAM settings.`,
		Example: `  calicoctl ipam show --show-blocks
  calicoctl ipam check -o report.json && calicoctl ipam release --from-report=report.json`,
	}
	c.AddCommand(newIPAMShowCmd(a), newIPAMCheckCmd(a), newIPAMReleaseCmd(a), newIPAMConfigureCmd(a), newIPAMSplitCmd(a))
	return c
}
