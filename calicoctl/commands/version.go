package commands

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

func newVersionCmd(a *app) *cobra.Command {
	var clientOnly bool
	var poll string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Display the version of this binary",
		Long: `Display version information for calicoctl, and for the cluster when it can
be reached (ClusterInformation's calicoVersion and clusterType). --poll keeps
watching and prints each change until interrupted.`,
		Example: `  calicoctl version
  calicoctl version --client
  calicoctl version --poll=10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var every time.Duration
			if poll != "" {
				d, err := time.ParseDuration(poll)
				if err != nil {
					return fmt.Errorf("invalid poll duration specified: %s", poll)
				}
				every = d
			}
			fmt.Fprintln(a.stdout, "Client Version:   ", a.clientVersion())
			fmt.Fprintln(a.stdout, "Git commit:       ", GitRevision)
			if clientOnly {
				return nil
			}
			c, err := a.connect()
			if errors.Is(err, dsconfig.ErrNotConfigured) {
				fmt.Fprintln(a.stdout, "Unable to detect installed Calico version")
				return nil
			}
			if err != nil {
				return err
			}
			defer c.Close()
			return a.printClusterVersion(cmdContext(cmd), c, every)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Display the client version only.")
	cmd.Flags().StringVar(&poll, "poll", "", "Poll for changes to the cluster information at a frequency specified using POLL duration.")
	return cmd
}

// printClusterVersion prints the cluster's version and type as Calico's
// version does: once, or on every change when polling (until ctx ends).
func (a *app) printClusterVersion(ctx context.Context, c datastore.Client, every time.Duration) error {
	var shownV, shownT string
	for {
		r, err := c.Get(ctx, datastore.Key{Kind: v3.KindClusterInformation, Name: "default"})
		if err == nil {
			ci := r.(*v3.ClusterInformation)
			v, t := ci.Spec.CalicoVersion, ci.Spec.ClusterType
			if v == "" {
				v = "unknown"
			}
			if t == "" {
				t = "unknown"
			}
			if v != shownV {
				fmt.Fprintln(a.stdout, "Cluster Version:  ", v)
				shownV = v
			}
			if t != shownT {
				fmt.Fprintln(a.stdout, "Cluster Type:     ", t)
				shownT = t
			}
		} else {
			if isNotFound(err) {
				err = fmt.Errorf("unable to retrieve Cluster Version or Type: %w (the node agent creates ClusterInformation on first start)", err)
			} else {
				err = fmt.Errorf("unable to retrieve Cluster Version or Type: %w", a.friendly(err))
			}
			shownV, shownT = "", ""
		}
		if every == 0 {
			return err
		}
		if err != nil {
			fmt.Fprintln(a.stderr, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}
