package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestCRDsMatchTypes regenerates the CRDs from api/v3 into a temporary
// folder and fails when they differ from the committed ones: run
// `make generate` after changing the types.
func TestCRDsMatchTypes(t *testing.T) {
	tmp := t.TempDir()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	run("tool", "controller-gen", "crd:allowDangerousTypes=true", "paths=./api/v3/...", "output:crd:artifacts:config="+tmp)
	run("run", "./hack/crdpostprocess", tmp)

	want := readDir(t, tmp)
	got := readDir(t, "crds")
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("manifests/crds/%s is missing: run make generate", name)
			continue
		}
		if !bytes.Equal(g, w) {
			t.Errorf("manifests/crds/%s is out of date with api/v3: run make generate", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("manifests/crds/%s has no type in api/v3: delete it or run make generate", name)
		}
	}
}

// TestEveryKindHasCRD checks each registered kind has a CRD with the same
// kind, plural, scope and group/version, and each CRD names a kind.
func TestEveryKindHasCRD(t *testing.T) {
	files := readDir(t, "crds")
	crds := map[string]apiextv1.CustomResourceDefinition{}
	for name, data := range files {
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		crds[crd.Spec.Names.Kind] = crd
	}
	for _, k := range v3.Kinds() {
		crd, ok := crds[k.Kind]
		if !ok {
			t.Errorf("kind %s has no CRD in manifests/crds", k.Kind)
			continue
		}
		if crd.Spec.Group != v3.CRDGroup {
			t.Errorf("%s: group %q, want %q", k.Kind, crd.Spec.Group, v3.CRDGroup)
		}
		if crd.Spec.Names.Plural != k.Plural {
			t.Errorf("%s: CRD plural %q, registered plural %q", k.Kind, crd.Spec.Names.Plural, k.Plural)
		}
		wantScope := apiextv1.ClusterScoped
		if k.Namespaced {
			wantScope = apiextv1.NamespaceScoped
		}
		if crd.Spec.Scope != wantScope {
			t.Errorf("%s: scope %q, want %q", k.Kind, crd.Spec.Scope, wantScope)
		}
		if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != v3.CRDVersion || !crd.Spec.Versions[0].Storage {
			t.Errorf("%s: want a single stored version %s", k.Kind, v3.CRDVersion)
		}
		delete(crds, k.Kind)
	}
	for kind := range crds {
		t.Errorf("CRD for kind %s has no registered type", kind)
	}
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = data
	}
	return out
}
