package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/lifecycle"
)

func newDeleteCmd(a *app) *cobra.Command {
	f := &writeFlags{}
	var namespace string
	cmd := &cobra.Command{
		Use:   "delete (-f FILENAME | KIND NAME...)",
		Short: "Delete resources named in files or on the command line",
		Example: `  calicoctl delete -f ippool.yaml
  calicoctl delete ippool my-pool
  calicoctl delete networkpolicy allow-web -n prod --skip-not-exists`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			op := opDelete(f.skipNotExists, a.log())
			if len(f.files) > 0 {
				if len(args) > 0 {
					return fmt.Errorf("give either -f or KIND NAME..., not both")
				}
				return a.runWrite(ctx, "delete", f, op)
			}
			if len(args) < 2 {
				return fmt.Errorf("name what to delete: calicoctl delete KIND NAME... (or -f FILE)")
			}
			info, err := resolveKind(args[0])
			if err != nil {
				return err
			}
			if err := checkUserWrite(info.Kind, "delete"); err != nil {
				// As Calico's: reported as the name's failure.
				return a.report("delete", writeResults{total: len(args) - 1, kind: info.Kind, errs: []error{err}})
			}
			ns := namespaceFor(info.Namespaced, namespace)
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			// As Calico's: every name is tried, each failure reported.
			res := writeResults{total: len(args) - 1, kind: info.Kind}
			for _, name := range args[1:] {
				r := info.New()
				r.SetName(name)
				r.SetNamespace(ns)
				if _, err := op(ctx, c, r); err != nil {
					res.errs = append(res.errs, a.friendly(err))
					continue
				}
				res.handled++
			}
			return a.report("delete", res)
		},
	}
	addFileFlag(cmd, f)
	cmd.Flags().BoolVarP(&f.skipNotExists, "skip-not-exists", "s", false, "treat resources that do not exist as deleted")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	return cmd
}

// namespaceFor applies calicoctl's rule: namespaced kinds default to the
// "default" namespace; cluster-scoped kinds have none.
func namespaceFor(namespaced bool, flag string) string {
	if !namespaced {
		return ""
	}
	if flag == "" {
		return "default"
	}
	return flag
}

// opDelete deletes through lifecycle, so a Node or an IPPool takes what
// hangs off it along, as in Calico.
func opDelete(skipNotExists bool, log *slog.Logger) writeOp {
	return func(ctx context.Context, c datastore.Client, r v3.Resource) (bool, error) {
		if err := checkUserWrite(v3.KindOf(r), "delete"); err != nil {
			return false, err
		}
		d := lifecycle.Deleter{Client: c, Logger: log}
		_, err := d.Delete(ctx, datastore.KeyOf(r), datastore.DeleteOptions{ResourceVersion: r.GetResourceVersion()})
		if skipNotExists && errors.Is(err, datastore.ErrNotFound) {
			return true, nil
		}
		return false, err
	}
}
