package v3

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestNetCorpusSetsEveryField checks that the valid net-* corpus documents,
// between them, set every JSON field of the network, BGP and IPAM kinds: a
// field no document sets is a field whose decoding is never tested.
func TestNetCorpusSetsEveryField(t *testing.T) {
	kinds := []string{
		KindIPPool, KindIPReservation, KindIPAMConfiguration, KindBGPConfiguration, KindBGPPeer,
		KindBGPFilter, KindNode, KindIPAMBlock, KindBlockAffinity, KindIPAMHandle,
	}
	files, err := filepath.Glob("testdata/valid/net-*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no net corpus files: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range splitDocs(string(data)) {
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var m map[string]any
			if err := json.Unmarshal(js, &m); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			kind, _ := m["kind"].(string)
			netCollectPaths(kind, m, seen)
		}
	}
	// Fields no valid document can set.
	cannotSet := map[string]bool{
		"BGPFilter.spec.importV4[].source": true, // source does not apply to import rules
		"BGPFilter.spec.importV6[].source": true,
	}
	var missing []string
	for _, k := range kinds {
		info, ok := LookupKind(k)
		if !ok {
			t.Fatalf("kind %s is not registered", k)
		}
		typ := reflect.TypeOf(info.New()).Elem()
		for _, p := range netFieldPaths(k, typ) {
			if !seen[p] && !cannotSet[p] {
				missing = append(missing, p)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no valid net-* corpus document sets:\n  %s", strings.Join(missing, "\n  "))
	}
}

// netCollectPaths records the JSON paths present in v, list elements
// written as "[]".
func netCollectPaths(prefix string, v any, seen map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := prefix + "." + k
			seen[p] = true
			netCollectPaths(p, e, seen)
		}
	case []any:
		for _, e := range x {
			netCollectPaths(prefix+"[]", e, seen)
		}
	}
}

// netFieldPaths lists the JSON paths of a kind's spec and status fields.
// Structs from other packages (times, durations, conditions) and maps are
// leaves; TypeMeta and ObjectMeta are not checked.
func netFieldPaths(prefix string, t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			prefix += "[]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	if pkg := t.PkgPath(); pkg != reflect.TypeOf(IPPool{}).PkgPath() && !strings.HasSuffix(pkg, "k8s.io/api/core/v1") {
		return nil
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous {
			if f.Type.PkgPath() == reflect.TypeOf(IPPool{}).PkgPath() || strings.HasSuffix(f.Type.PkgPath(), "k8s.io/api/core/v1") {
				out = append(out, netFieldPaths(prefix, f.Type)...)
			}
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := prefix + "." + name
		out = append(out, p)
		out = append(out, netFieldPaths(p, f.Type)...)
	}
	return out
}
