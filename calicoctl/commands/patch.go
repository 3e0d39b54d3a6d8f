package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func newPatchCmd(a *app) *cobra.Command {
	var patch, namespace, patchType string
	cmd := &cobra.Command{
		Use:   "patch KIND NAME -p PATCH [-t strategic|json|merge]",
		Short: "Patch a pre-existing resource in place",
		Long: `Change fields of one resource with a patch: strategic (the default, as
Calico's: a JSON merge patch that also understands Kubernetes' $patch
directives), merge (RFC 7386 JSON merge patch) or json (RFC 6902 JSON patch,
a list of operations). The patch may be written as YAML.`,
		Example: `  calicoctl patch ippool default-ipv4-ippool -p '{"spec": {"natOutgoing": false}}'
  calicoctl patch node node1 -p '{"spec": {"bgp": {"routeReflectorClusterID": "224.0.0.1"}}}'
  calicoctl patch ippool pool-a -t json -p '[{"op": "replace", "path": "/spec/disabled", "value": true}]'
  calicoctl patch ippool pool-a -t merge -p '{"spec": {"natOutgoing": null}}'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if patch == "" {
				return fmt.Errorf("give the patch with -p, e.g. -p '{\"spec\": {...}}'")
			}
			pj, err := yaml.YAMLToJSON([]byte(patch))
			if err != nil {
				return fmt.Errorf("the patch is not valid JSON or YAML: %w", err)
			}
			apply, err := patcher(patchType, pj)
			if err != nil {
				return err
			}
			return a.modify(cmd.Context(), args[0], args[1], namespace, func(info v3.KindInfo, doc []byte) ([]byte, string, error) {
				out, err := apply(doc, info.New())
				if err != nil {
					return nil, "", err
				}
				return out, fmt.Sprintf("Successfully patched 1 '%s' resource", info.Kind), nil
			})
		},
	}
	cmd.Flags().StringVarP(&patch, "patch", "p", "", "Spec to use to patch the resource.")
	cmd.Flags().StringVarP(&patchType, "type", "t", "strategic", "Format of patch type: strategic, json, or merge.")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "Namespace of the resource.")
	addAllowUnsupportedFlag(cmd, a)
	return cmd
}

// patcher returns the function applying a patch of the given type to a
// resource's JSON (dataStruct is an empty object of its kind, which
// strategic merge reads its patch strategies from).
func patcher(patchType string, pj []byte) (func(doc []byte, dataStruct any) ([]byte, error), error) {
	switch patchType {
	case "strategic":
		var p any
		if err := json.Unmarshal(pj, &p); err != nil {
			return nil, fmt.Errorf("the patch is not valid JSON: %w", err)
		}
		if _, ok := p.(map[string]any); !ok {
			return nil, fmt.Errorf("a strategic merge patch must be an object, e.g. {\"spec\": {...}} (use -t json for a list of operations)")
		}
		return func(doc []byte, ds any) ([]byte, error) {
			out, err := strategicpatch.StrategicMergePatch(doc, pj, ds)
			if err != nil {
				return nil, fmt.Errorf("performing strategic merge patch: %w", err)
			}
			return out, nil
		}, nil
	case "merge":
		return func(doc []byte, _ any) ([]byte, error) {
			out, err := jsonpatch.MergePatch(doc, pj)
			if err != nil {
				return nil, fmt.Errorf("performing merge patch: %w", err)
			}
			return out, nil
		}, nil
	case "json":
		ops, err := jsonpatch.DecodePatch(pj)
		if err != nil {
			return nil, fmt.Errorf("the patch is not a JSON patch (a list of operations): %w", err)
		}
		return func(doc []byte, _ any) ([]byte, error) {
			out, err := ops.Apply(doc)
			if err != nil {
				return nil, fmt.Errorf("performing json patch: %w", err)
			}
			return out, nil
		}, nil
	}
	return nil, fmt.Errorf("unknown patch type %q: use strategic, json or merge", patchType)
}

// modify reads a resource, changes its JSON form with change, and writes it
// back with compare-and-swap, retrying when someone else wrote in between.
// change returns the new JSON and the message to print on success.
func (a *app) modify(ctx context.Context, kindArg, name, namespace string, change func(info v3.KindInfo, doc []byte) ([]byte, string, error)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	info, err := resolveKind(kindArg)
	if err != nil {
		return err
	}
	if err := checkUserWrite(info.Kind, "apply or replace"); err != nil {
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
			return hitError(withPlace(key.String(), a.friendly(err)))
		}
		js, err := v3.EncodeJSON(cur)
		if err != nil {
			return err
		}
		out, msg, err := change(info, js)
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
		if err := a.checkUnsupported(next, unsupportedIn(cur)); err != nil {
			return err
		}
		next.SetResourceVersion(cur.GetResourceVersion())
		_, err = c.Update(ctx, next)
		if errors.Is(err, datastore.ErrConflict) && attempt < 5 {
			continue
		}
		if err != nil {
			return hitError(withPlace(key.String(), a.friendly(err)))
		}
		fmt.Fprintln(a.stdout, msg)
		return nil
	}
}
