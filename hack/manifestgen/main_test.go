package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeParts(t *testing.T, parts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range parts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRenderPerDatastore: a part's template sees the datastore; documents
// that render empty are left out; CRDs follow the first part.
func TestRenderPerDatastore(t *testing.T) {
	parts := writeParts(t, map[string]string{
		"10-a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
		"20-b.yaml": "{{- if .Etcd }}\napiVersion: v1\nkind: Secret\nmetadata:\n  name: etcd-only\n{{- end }}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: '{{ .Image }}'\n",
	})
	crds := writeParts(t, map[string]string{"x.yaml": "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: x\n"})
	kdd, err := render(parts, crds, Data{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := render(parts, "", Data{Etcd: true, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kdd), "etcd-only") || !strings.Contains(string(etcd), "etcd-only") {
		t.Errorf("the etcd-only Secret is misplaced:\n%s\n%s", kdd, etcd)
	}
	if strings.Contains(string(etcd), "CustomResourceDefinition") {
		t.Error("CRDs in the etcd manifest")
	}
	if a, x := strings.Index(string(kdd), "name: a"), strings.Index(string(kdd), "name: x"); a < 0 || x < a {
		t.Errorf("the CRDs do not follow the first part:\n%s", kdd)
	}
	if strings.Count(string(kdd), "\n---\n") != 3 || !strings.Contains(string(kdd), "name: 'img'") {
		t.Errorf("want 3 documents with the image:\n%s", kdd)
	}
}

func TestRenderRefusesBadParts(t *testing.T) {
	for name, text := range map[string]string{
		"no kind":         "apiVersion: v1\nmetadata:\n  name: a\n",
		"not YAML":        "apiVersion: v1\nkind: [\n",
		"unknown field":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{ .Nope }}'\n",
		"content no kind": "just: text\n",
	} {
		parts := writeParts(t, map[string]string{"10.yaml": text})
		if _, err := render(parts, "", Data{}); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestImageRefFromVersion: the manifests name the image tagged with
// VERSION's version; a file without one is refused, never "latest".
func TestImageRefFromVersion(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]string{
		"v0.9.0\n":      Repository + ":v0.9.0",
		"v1.2.3-rc.1":   Repository + ":v1.2.3-rc.1",
		"latest\n":      "",
		"":              "",
		"v1.0.0 extra":  "",
		"v1.0.0:latest": "",
	} {
		f := filepath.Join(dir, "VERSION")
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := imageRef(f)
		if want == "" {
			if err == nil {
				t.Errorf("%q: got %s, want an error", text, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: got %s, %v; want %s", text, got, err, want)
		}
	}
	if _, err := imageRef(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing VERSION file gave an image")
	}
}
