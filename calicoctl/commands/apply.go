package commands

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func newApplyCmd(a *app) *cobra.Command {
	f := &writeFlags{}
	cmd := &cobra.Command{
		Use:   "apply -f FILENAME",
		Short: "Create resources, or update them if they exist",
		Example: `  calicoctl apply -f ippool.yaml
  calicoctl apply -f manifests/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runWrite(cmd.Context(), "apply", f, opApply)
		},
	}
	addFileFlag(cmd, f)
	addAllowUnsupportedFlag(cmd, a)
	return cmd
}

// opApply creates or updates. With no resourceVersion in the input it
// updates whatever is stored (retrying lost races); with one it is a
// compare-and-swap on that version.
func opApply(ctx context.Context, c datastore.Client, r v3.Resource) (bool, error) {
	for attempt := 0; ; attempt++ {
		// Calico's apply refuses a read-only kind before it looks.
		if err := checkUserWrite(v3.KindOf(r), "apply"); err != nil {
			return false, err
		}
		cur, err := c.Get(ctx, datastore.KeyOf(r))
		if errors.Is(err, datastore.ErrNotFound) {
			if _, err = c.Create(ctx, r); errors.Is(err, datastore.ErrAlreadyExists) && attempt < 5 {
				continue
			}
			return false, err
		}
		if err != nil {
			return false, err
		}
		if err = updateFrom(ctx, c, r, cur); errors.Is(err, datastore.ErrConflict) && r.GetResourceVersion() == "" && attempt < 5 {
			time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
			continue
		}
		return false, err
	}
}
