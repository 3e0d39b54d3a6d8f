package commands

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func newCreateCmd(a *app) *cobra.Command {
	f := &writeFlags{}
	cmd := &cobra.Command{
		Use:   "create -f FILENAME",
		Short: "Create resources from files; fails for any that already exist",
		Example: `  calicoctl create -f ippool.yaml
  calicoctl create -f policies/ --skip-exists
  cat pool.yaml | calicoctl create -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runWrite(cmd.Context(), "create", f, opCreate(f.skipExists))
		},
	}
	addFileFlag(cmd, f)
	addAllowUnsupportedFlag(cmd, a)
	cmd.Flags().BoolVar(&f.skipExists, "skip-exists", false, "leave resources that already exist alone instead of failing")
	return cmd
}

func opCreate(skipExists bool) writeOp {
	return func(ctx context.Context, c datastore.Client, r v3.Resource) (bool, error) {
		if err := checkUserWrite(v3.KindOf(r), "create or apply"); err != nil {
			return false, err
		}
		_, err := c.Create(ctx, r)
		if skipExists && errors.Is(err, datastore.ErrAlreadyExists) {
			return true, nil
		}
		return false, err
	}
}
