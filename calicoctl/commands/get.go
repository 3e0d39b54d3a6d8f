package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func isNotFound(err error) bool { return errors.Is(err, datastore.ErrNotFound) }

// warnUndecodable names, one line each, the stored records a list left
// out because they cannot be decoded, and how to be rid of them.
func warnUndecodable(w io.Writer, bad []datastore.BadRecord) {
	for _, b := range bad {
		del := "calicoctl delete " + strings.ToLower(b.Key.Kind) + " " + b.Key.Name
		if b.Key.Namespace != "" {
			del += " -n " + b.Key.Namespace
		}
		fmt.Fprintf(w, "Warning: %s %q not listed: %v (fix it, or remove it with %s)\n", b.Key.Kind, b.Key.Name, b, del)
	}
}

func newGetCmd(a *app) *cobra.Command {
	var (
		output, namespace, selector string
		allNamespaces, export       bool
		files                       []string
	)
	cmd := &cobra.Command{
		Use:   "get (KIND [NAME...] | -f FILENAME)",
		Short: "Show resources",
		Long: `Show resources of a kind (all, or the named ones), or the ones named in
files. Output: a table (default), wide (more columns), custom-columns=H1,H2,
go-template=TEMPLATE, go-template-file=FILE, yaml, json or name. --export
leaves out what is specific to this cluster (namespace, uid,
resourceVersion, creationTimestamp) when resources are named.`,
		Example: `  calicoctl get ippools
  calicoctl get ippool default-ipv4-ippool -o yaml
  calicoctl get networkpolicy -A -o wide
  calicoctl get gnp --selector 'team == "net"'
  calicoctl get ippools -o custom-columns=NAME,CIDR,ASSIGNMENTMODE
  calicoctl get ippools -o go-template='{{range .}}{{range .Items}}{{.Spec.CIDR}} {{end}}{{end}}'
  calicoctl get ippool default-ipv4-ippool -o yaml --export
  calicoctl get -f policy.yaml -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			p, err := newPrinter(output, allNamespaces || namespace != "")
			if err != nil {
				return err
			}
			var targets []datastore.Key
			var info v3.KindInfo
			listAll := false
			switch {
			case len(files) > 0:
				if len(args) > 0 {
					return fmt.Errorf("give either -f or KIND [NAME...], not both")
				}
				ins, err := a.readInputs(files, inputOptions{})
				if err != nil {
					return err
				}
				for _, in := range ins {
					targets = append(targets, datastore.KeyOf(in.r))
				}
				info, _ = v3.LookupKind(targets[0].Kind)
			case len(args) == 0:
				return fmt.Errorf("name a resource type: calicoctl get KIND [NAME...] (e.g. calicoctl get ippools)")
			default:
				info, err = resolveKind(args[0])
				if err != nil {
					return err
				}
				if len(args) == 1 {
					listAll = true
				}
				ns := namespaceFor(info.Namespaced, namespace)
				if allNamespaces && len(args) > 1 {
					return fmt.Errorf("-A lists every namespace: it cannot be combined with names")
				}
				for _, name := range args[1:] {
					targets = append(targets, datastore.Key{Kind: info.Kind, Namespace: ns, Name: name})
				}
			}

			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			var items []v3.Resource
			if listAll {
				opts := datastore.ListOptions{Selector: selector}
				if info.Namespaced && !allNamespaces {
					opts.Namespace = namespaceFor(true, namespace)
				}
				l, err := c.List(ctx, info.Kind, opts)
				if err != nil {
					return a.friendly(err)
				}
				items = l.Items
				p.revision = l.Revision
				// Calico lists the records it can read and leaves out
				// the rest; the output is the same here, and each left
				// out is named on stderr.
				warnUndecodable(a.stderr, l.Bad)
			} else {
				for _, k := range targets {
					r, err := c.Get(ctx, k)
					if err != nil {
						return withPlace(k.String(), a.friendly(err))
					}
					items = append(items, r)
				}
			}
			if export && !listAll {
				for _, it := range items {
					exportStrip(it)
				}
			}
			return p.print(a.stdout, info, items, listAll, clusterConfig(ctx, c))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "ps", "Output format: yaml, json, ps, wide, custom-columns=..., go-template=..., go-template-file=..., name")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list namespaced resources in every namespace")
	// Calico's calicoctl also takes -a (its docopt past); hidden, as there.
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces-a", "a", false, "Alias for --all-namespaces.")
	_ = cmd.Flags().MarkHidden("all-namespaces-a")
	// -l is the global --log-level, as in Calico's calicoctl.
	cmd.Flags().StringVar(&selector, "selector", "", "only resources whose labels match this Calico selector (Tabby's)")
	cmd.Flags().BoolVar(&export, "export", false, "Strip cluster-specific information from the output.")
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "get the resources named in a file, directory or - (stdin)")
	return cmd
}

// exportStrip removes what ties a resource to this cluster, as Calico's
// --export does.
func exportStrip(r v3.Resource) {
	r.SetNamespace("")
	r.SetUID("")
	r.SetResourceVersion("")
	r.SetCreationTimestamp(metav1.Time{})
	r.SetDeletionTimestamp(nil)
	r.SetDeletionGracePeriodSeconds(nil)
}
