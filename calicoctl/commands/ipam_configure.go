package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func newIPAMConfigureCmd(a *app) *cobra.Command {
	var (
		strict      bool
		maxBlocks   int32
		persistence string
		cooldown    int
	)
	cmd := &cobra.Command{
		Use:   "configure --strictaffinity=true|false [--max-blocks-per-host=N]",
		Short: "Change the cluster's IPAM settings (IPAMConfiguration default)",
		Example: `  calicoctl ipam configure --strictaffinity=true
  calicoctl ipam configure --max-blocks-per-host=4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			setStrict := cmd.Flags().Changed("strictaffinity")
			setMax := cmd.Flags().Changed("max-blocks-per-host")
			setPersistence := cmd.Flags().Changed("kubevirt-ip-persistence")
			setCooldown := cmd.Flags().Changed("ip-cooldown-seconds")
			// Tabby's IPAM has neither KubeVirt address persistence nor IP
			// cooldown: only the values that change nothing are accepted.
			if setPersistence {
				switch persistence {
				case "Enabled":
				case "Disabled":
					return fmt.Errorf("--kubevirt-ip-persistence=Disabled is not supported by Tabby: its IPAM has no KubeVirt handling (leave it Enabled, the default)")
				default:
					return fmt.Errorf("invalid value for --kubevirt-ip-persistence. Use Enabled or Disabled")
				}
			}
			if setCooldown && cooldown != 0 {
				return fmt.Errorf("--ip-cooldown-seconds=%d is not supported by Tabby: its IPAM hands a released address out again at once (0 is the only value)", cooldown)
			}
			if !setStrict && !setMax && !setPersistence && !setCooldown {
				return fmt.Errorf("nothing to change: pass --strictaffinity=true|false and/or --max-blocks-per-host=N")
			}
			if maxBlocks < 0 || maxBlocks > 1000000 {
				return fmt.Errorf("--max-blocks-per-host=%d is out of range: give 0 (no limit) to 1000000", maxBlocks)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmdContext(cmd)
			err = updateIPAMConfig(ctx, c, func(s *v3.IPAMConfigurationSpec) {
				if setStrict {
					s.StrictAffinity = strict
				}
				if setMax {
					s.MaxBlocksPerHost = maxBlocks
				}
				if setPersistence {
					s.KubeVirtVMAddressPersistence = nil // unset means Enabled
				}
				if setCooldown {
					s.IPCooldownSeconds = 0
				}
			})
			if err != nil {
				return err
			}
			if setStrict {
				fmt.Fprintf(a.stdout, "Successfully set StrictAffinity to: %t\n", strict)
			}
			if setMax {
				fmt.Fprintf(a.stdout, "Successfully set MaxBlocksPerHost to: %d\n", maxBlocks)
			}
			if setPersistence {
				fmt.Fprintln(a.stdout, "Successfully set KubeVirtVMAddressPersistence to:", persistence)
			}
			if setCooldown {
				fmt.Fprintln(a.stdout, "Successfully set IPCooldownSeconds to:", cooldown)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strictaffinity", false, "true: nodes never borrow addresses from other nodes' blocks")
	cmd.Flags().Int32Var(&maxBlocks, "max-blocks-per-host", 0, "most blocks one node may claim (0: no limit)")
	cmd.Flags().StringVar(&persistence, "kubevirt-ip-persistence", "", "Control whether KubeVirt VMs retain persistent IP addresses (Enabled|Disabled); Tabby: Enabled only.")
	cmd.Flags().IntVar(&cooldown, "ip-cooldown-seconds", -1, "Set the minimum time between release and re-allocation of an IP address; Tabby: 0 only.")
	return cmd
}

// updateIPAMConfig creates or changes IPAMConfiguration default with a
// compare-and-swap, retrying lost races.
func updateIPAMConfig(ctx context.Context, c datastore.Client, change func(*v3.IPAMConfigurationSpec)) error {
	key := datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"}
	for attempt := 0; attempt < 5; attempt++ {
		r, err := c.Get(ctx, key)
		if isNotFound(err) {
			info, _ := v3.LookupKind(v3.KindIPAMConfiguration)
			cfg := info.New().(*v3.IPAMConfiguration)
			cfg.Name = "default"
			cfg.Default()
			change(&cfg.Spec)
			if _, err = c.Create(ctx, cfg); errors.Is(err, datastore.ErrAlreadyExists) {
				continue
			}
		} else if err == nil {
			cfg := r.(*v3.IPAMConfiguration)
			change(&cfg.Spec)
			if _, err = c.Update(ctx, cfg); errors.Is(err, datastore.ErrConflict) {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("writing IPAMConfiguration default: %w", friendly(err))
		}
		return nil
	}
	return fmt.Errorf("writing IPAMConfiguration default: %w", friendly(datastore.ErrConflict))
}
