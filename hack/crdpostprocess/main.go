// Command crdpostprocess rewrites the CRDs controller-gen writes so the
// Kubernetes API server accepts them: controller-gen cannot express Calico's
// number-or-string fields (ports, protocols, AS numbers) for struct types
// with custom JSON, so every schema marked x-kubernetes-int-or-string is
// replaced by the structural int-or-string form (anyOf integer, string);
// and list items that Calico writes as JSON null (free ordinals in an
// IPAMBlock's allocations) are marked nullable, which controller-gen has
// no marker for. It also deletes the CRDs Calico does not have (see
// notCalicos), so that manifests/crds is exactly Calico's CRD set.
//
// Usage: crdpostprocess DIR (rewrites every *.yaml in DIR in place).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpostprocess DIR")
		os.Exit(2)
	}
	files, err := filepath.Glob(filepath.Join(os.Args[1], "*.yaml"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "crdpostprocess: no CRD files in %s\n", os.Args[1])
		os.Exit(1)
	}
	for _, f := range files {
		if why, ok := notCalicos[filepath.Base(f)]; ok {
			if err := os.Remove(f); err != nil {
				fmt.Fprintf(os.Stderr, "crdpostprocess: %v\n", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "crdpostprocess: removed %s: %s\n", filepath.Base(f), why)
			continue
		}
		if err := rewriteFile(f); err != nil {
			fmt.Fprintf(os.Stderr, "crdpostprocess: %s: %v\n", f, err)
			os.Exit(1)
		}
	}
}

// notCalicos are the CRDs controller-gen makes from api/v3 that Calico's
// Kubernetes datastore has none of, and why.
var notCalicos = map[string]string{
	"crd.projectcalico.org_nodes.yaml":              "Calico Nodes are the Kubernetes Nodes",
	"crd.projectcalico.org_profiles.yaml":           "Calico derives Profiles from Namespaces and ServiceAccounts",
	"crd.projectcalico.org_workloadendpoints.yaml":  "Calico derives WorkloadEndpoints from Pods",
	"crd.projectcalico.org_ipamconfigurations.yaml": "Calico stores IPAMConfiguration as ipamconfigs (kind IPAMConfig, datastore/kdd/crdv1)",
}

func rewriteFile(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := Rewrite(in)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

// Rewrite returns the CRD YAML with int-or-string schemas made structural.
func Rewrite(in []byte) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return nil, err
	}
	fixIntOrString(doc)
	dropStatus(doc)
	if err := markNullableItems(doc); err != nil {
		return nil, err
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

// statusForms says, per CRD, whether Calico's form has a status and a
// status subresource; CRDs not listed have neither (the status of the v3
// type is then not part of the stored form).
var statusForms = map[string]struct{ status, subresource bool }{
	"caliconodestatuses.crd.projectcalico.org":            {status: true},
	"kubecontrollersconfigurations.crd.projectcalico.org": {status: true, subresource: true},
}

func dropStatus(doc map[string]any) {
	name, _ := dig(doc, "metadata", "name").(string)
	form := statusForms[name]
	versions, _ := dig(doc, "spec", "versions").([]any)
	for _, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if form.subresource {
			vm["subresources"] = map[string]any{"status": map[string]any{}}
		} else if sub, ok := vm["subresources"].(map[string]any); ok {
			delete(sub, "status")
			if len(sub) == 0 {
				delete(vm, "subresources")
			}
		}
		if !form.status {
			if props, ok := dig(vm, "schema", "openAPIV3Schema", "properties").(map[string]any); ok {
				delete(props, "status")
			}
		}
	}
}

func fixIntOrString(node any) {
	switch n := node.(type) {
	case map[string]any:
		if v, ok := n["x-kubernetes-int-or-string"].(bool); ok && v {
			for k := range n {
				if k != "description" && k != "x-kubernetes-int-or-string" {
					delete(n, k)
				}
			}
			n["anyOf"] = []any{
				map[string]any{"type": "integer"},
				map[string]any{"type": "string"},
			}
			return
		}
		for _, v := range n {
			fixIntOrString(v)
		}
	case []any:
		for _, v := range n {
			fixIntOrString(v)
		}
	}
}

// nullableItems lists, per CRD name, the spec fields whose list items may be
// null.
var nullableItems = map[string][]string{
	"ipamblocks.crd.projectcalico.org": {"allocations"},
}

func markNullableItems(doc map[string]any) error {
	name, _ := dig(doc, "metadata", "name").(string)
	fields := nullableItems[name]
	if len(fields) == 0 {
		return nil
	}
	versions, _ := dig(doc, "spec", "versions").([]any)
	for _, v := range versions {
		for _, f := range fields {
			items, ok := dig(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", f, "items").(map[string]any)
			if !ok {
				return fmt.Errorf("%s: spec.%s has no list items schema to mark nullable", name, f)
			}
			items["nullable"] = true
		}
	}
	return nil
}

func dig(node any, path ...string) any {
	for _, p := range path {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[p]
	}
	return node
}
