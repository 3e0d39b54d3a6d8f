package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func newPatchCmd(a *app) *cobra.Command {
	var patch, namespace string
	cmd := &cobra.Command{
		Use:   "patch KIND NAME -p PATCH",
		Short: "Change fields of a resource with a JSON merge patch",
		Example: `  calicoctl patch ippool default-ipv4-ippool -p '{"spec": {"natOutgoing": false}}'
  calicoctl patch node node1 -p '{"spec": {"bgp": {"routeReflectorClusterID": "224.0.0.1"}}}'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if patch == "" {
				return fmt.Errorf("give the patch with -p, e.g. -p '{\"spec\": {...}}'")
			}
			pj, err := yaml.YAMLToJSON([]byte(patch))
			if err != nil {
				return fmt.Errorf("the patch is not valid JSON or YAML: %w", err)
			}
			var p any
			if err := json.Unmarshal(pj, &p); err != nil {
				return fmt.Errorf("the patch is not valid JSON: %w", err)
			}
			if _, ok := p.(map[string]any); !ok {
				return fmt.Errorf("the patch must be an object, e.g. {\"spec\": {...}}")
			}
			return a.modify(cmd.Context(), args[0], args[1], namespace, "patched", func(doc map[string]any) error {
				mergePatch(doc, p) // doc is a map, so it is patched in place
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&patch, "patch", "p", "", "JSON (or YAML) merge patch to apply")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of namespaced resources (default \"default\")")
	return cmd
}

// mergePatch applies an RFC 7386 JSON merge patch: objects merge
// recursively, null deletes, anything else replaces.
func mergePatch(target, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(tm, k)
			continue
		}
		tm[k] = mergePatch(tm[k], v)
	}
	return tm
}

// modify reads a resource, changes its JSON form with change, and writes it
// back with compare-and-swap, retrying when someone else wrote in between.
func (a *app) modify(ctx context.Context, kindArg, name, namespace, past string, change func(map[string]any) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	info, err := resolveKind(kindArg)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	key := datastore.Key{Kind: info.Kind, Namespace: namespaceFor(info.Namespaced, namespace), Name: name}
	for attempt := 0; ; attempt++ {
		cur, err := c.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("%s: %w", key, friendly(err))
		}
		js, err := v3.EncodeJSON(cur)
		if err != nil {
			return err
		}
		var doc map[string]any
		if err := json.Unmarshal(js, &doc); err != nil {
			return err
		}
		if err := change(doc); err != nil {
			return err
		}
		out, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		next := info.New()
		strict, err := kjson.UnmarshalStrict(out, next, kjson.DisallowUnknownFields)
		if err == nil && len(strict) > 0 {
			err = strict[0]
		}
		if err != nil {
			return fmt.Errorf("the result is not a valid %s: %s", info.Kind, strings.TrimPrefix(err.Error(), "json: "))
		}
		if next.GetName() != name || next.GetNamespace() != key.Namespace {
			return fmt.Errorf("a patch cannot change the name or namespace")
		}
		next.SetResourceVersion(cur.GetResourceVersion())
		_, err = c.Update(ctx, next)
		if errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, friendly(err))
		}
		fmt.Fprintf(a.stdout, "Successfully %s 1 '%s' resource.\n", past, info.Kind)
		return nil
	}
}
