package commands

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
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
			kind, name := args[0], args[1]
			return a.modify(cmd.Context(), kind, name, namespace, func(_ v3.KindInfo, js []byte) ([]byte, string, error) {
				var doc map[string]any
				if err := json.Unmarshal(js, &doc); err != nil {
					return nil, "", err
				}
				md, _ := doc["metadata"].(map[string]any)
				labels, _ := md["labels"].(map[string]any)
				if labels == nil {
					labels = map[string]any{}
				}
				old, exists := labels[key]
				msg := fmt.Sprintf("Successfully set label %s on %s %s", key, kind, name)
				switch {
				case remove && !exists:
					return nil, "", fmt.Errorf("cannot remove label of %s %s, key %s does not exist", kind, name, key)
				case remove:
					delete(labels, key)
					msg = fmt.Sprintf("Successfully removed label %s from %s %s", key, kind, name)
				case exists && old != value && !overwrite:
					return nil, "", fmt.Errorf("failed to update label of %s %s, key %s is already present. please use '--overwrite' to set a new value", kind, name, key)
				case exists:
					labels[key] = value
					msg = fmt.Sprintf("Successfully updated label %s on %s %s", key, kind, name)
				default:
					labels[key] = value
				}
				md["labels"] = labels
				out, err := json.Marshal(doc)
				return out, msg, err
			})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change a label that is already set")
	cmd.Flags().BoolVar(&remove, "remove", false, "remove the label KEY")
	return cmd
}
