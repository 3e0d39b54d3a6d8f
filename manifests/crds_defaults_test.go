package manifests

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestCRDDefaultsMatchGoDefaults: every default the CRD schemas declare
// (which the API server applies in Kubernetes mode) must also be applied by
// the kind's Default() (which runs for both datastores), or the two
// datastores would store different objects for the same input.
func TestCRDDefaultsMatchGoDefaults(t *testing.T) {
	found := 0
	for name, data := range readDir(t, "crds") {
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		info, ok := v3.LookupKind(crd.Spec.Names.Kind)
		if !ok {
			continue // TestEveryKindHasCRD reports it
		}
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		var defaults []defaulted
		collectDefaults(&spec, []string{"spec"}, &defaults)
		for _, d := range defaults {
			found++
			t.Run(info.Kind+"."+strings.Join(d.path, "."), func(t *testing.T) {
				// The API server defaults a field when its parent object is
				// present: build exactly that, then let Go default it.
				doc := map[string]any{"apiVersion": v3.GroupVersion, "kind": info.Kind, "metadata": map[string]any{"name": "default"}}
				cur := doc
				for _, p := range d.path[:len(d.path)-1] {
					next := map[string]any{}
					cur[p] = next
					cur = next
				}
				js, _ := json.Marshal(doc)
				r, err := v3.DecodeOne(js)
				if err != nil {
					t.Fatal(err)
				}
				r.Default()
				out, _ := v3.EncodeJSON(r)
				var back map[string]any
				json.Unmarshal(out, &back)
				var got any = back
				for _, p := range d.path {
					m, _ := got.(map[string]any)
					got = m[p]
				}
				var want any
				json.Unmarshal(d.value, &want)
				if want == "" && got == nil {
					return // an empty-string default is the zero value Go omits
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("CRD default %s, Go Default() gives %v", d.value, got)
				}
			})
		}
	}
	if found == 0 {
		t.Fatal("no CRD defaults found: the walk is broken")
	}
}

type defaulted struct {
	path  []string
	value []byte
}

// collectDefaults finds defaults under object properties (not inside
// lists, whose defaults apply per element).
func collectDefaults(s *apiextv1.JSONSchemaProps, path []string, out *[]defaulted) {
	if s.Default != nil {
		*out = append(*out, defaulted{path: append([]string(nil), path...), value: s.Default.Raw})
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := s.Properties[k]
		collectDefaults(&p, append(path, k), out)
	}
}
