package commands

import (
	"context"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func newReplaceCmd(a *app) *cobra.Command {
	f := &writeFlags{}
	cmd := &cobra.Command{
		Use:     "replace -f FILENAME",
		Short:   "Replace existing resources; fails for any that do not exist",
		Example: `  calicoctl replace -f ippool.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runWrite(cmd.Context(), "replace", f, opReplace)
		},
	}
	addFileFlag(cmd, f)
	addAllowUnsupportedFlag(cmd, a)
	return cmd
}

func opReplace(ctx context.Context, c datastore.Client, r v3.Resource) (bool, error) {
	if err := checkUserWrite(v3.KindOf(r), "apply or replace"); err != nil {
		return false, err
	}
	cur, err := c.Get(ctx, datastore.KeyOf(r))
	if err != nil {
		return false, err
	}
	return false, updateFrom(ctx, c, r, cur)
}
