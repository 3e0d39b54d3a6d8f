package commands

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newLabelCmd(a *app) *cobra.Command {
	var namespace string
	var overwrite, remove bool
	cmd := &cobra.Command{
		Use:   "label KIND NAME KEY=VALUE | label KIND NAME KEY --remove",
		Short: "Add, change or remove a label on a resource",
		Example: `  calicoctl label nodes node1 rack=r12
  calicoctl label nodes node1 rack=r13 --overwrite
  calicoctl label nodes node1 rack --remove`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, value, hasValue := strings.Cut(args[2], "=")
			switch {
			case remove && hasValue:
				return fmt.Errorf("--remove takes only the key, not KEY=VALUE")
			case !remove && !hasValue:
				return fmt.Errorf("give KEY=VALUE to set a label, or KEY --remove to remove it")
			case key == "":
				return fmt.Errorf("the label key is empty")
			}
			past := "labeled"
			if remove {
				past = "removed the label from"
			}
			return a.modify(cmd.Context(), args[0], args[1], namespace, past, func(doc map[string]any) error {
				md, _ := doc["metadata"].(map[string]any)
				labels, _ := md["labels"].(map[string]any)
				if labels == nil {
					labels = map[string]any{}
				}
				old, exists := labels[key]
				switch {
				case remove && !exists:
					return fmt.Errorf("label %q is not set on %s", key, args[1])
				case remove:
					delete(labels, key)
				case exists && old != value && !overwrite:
					return fmt.Errorf("label %q is already %q: use --overwrite to change it", key, old)
				default:
					labels[key] = value
				}
				md["labels"] = labels
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change a label that is already set")
	cmd.Flags().BoolVar(&remove, "remove", false, "remove the label KEY")
	return cmd
}
