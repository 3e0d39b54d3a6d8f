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

	"k8s.io/client-go/rest"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
)

// TestCRDsMatchTypes regenerates the CRDs from api/v3 and
// datastore/kdd/crdv1 (as `make generate` does) into a temporary folder
// and fails when they differ from the committed ones: run `make generate`
// after changing the types.
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
	run("tool", "controller-gen", "crd:allowDangerousTypes=true", "paths=./datastore/kdd/crdv1/...", "output:crd:artifacts:config="+tmp)
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
		if _, ok := want[name]; !ok && name != cnpCRDFile {
			t.Errorf("manifests/crds/%s has no type in api/v3: delete it or run make generate", name)
		}
	}
}

// TestEveryKindHasCRD checks each registered kind that Calico stores as a
// custom resource has a CRD with its stored kind, plural, scope and
// group/version (the client's own mapping), that the kinds Calico derives
// from Kubernetes objects have none, and that each CRD names a kind.
func TestEveryKindHasCRD(t *testing.T) {
	files := readDir(t, "crds")
	crds := map[string]apiextv1.CustomResourceDefinition{}
	for name, data := range files {
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		crds[crd.Spec.Names.Plural] = crd
	}
	c, err := kdd.New(kdd.Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range v3.Kinds() {
		res, err := c.Resources(k.Kind)
		if err != nil {
			t.Fatal(err)
		}
		var plural string
		for _, r := range res {
			if r.Group == v3.CRDGroup {
				plural = r.Resource
			}
		}
		if kdd.DerivedKind(k.Kind) {
			if plural != "" {
				t.Errorf("kind %s is derived from Kubernetes objects, yet read from CRD %s", k.Kind, plural)
			}
			continue
		}
		crd, ok := crds[plural]
		if !ok {
			t.Errorf("kind %s: no CRD %q in manifests/crds", k.Kind, plural)
			continue
		}
		if crd.Spec.Group != v3.CRDGroup {
			t.Errorf("%s: group %q, want %q", k.Kind, crd.Spec.Group, v3.CRDGroup)
		}
		wantKind := k.Kind
		if k.Kind == v3.KindIPAMConfiguration {
			wantKind = "IPAMConfig"
		}
		if crd.Spec.Names.Kind != wantKind {
			t.Errorf("%s: CRD kind %q, want %q", k.Kind, crd.Spec.Names.Kind, wantKind)
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
		delete(crds, plural)
	}
	delete(crds, kdd.ClusterNetworkPolicyGVR.Resource) // read, as GlobalNetworkPolicies kcnp.<name>
	for plural := range crds {
		t.Errorf("CRD %s stores no registered kind", plural)
	}
}

// TestClusterNetworkPolicyCRD: manifests/crds holds network-policy-api's
// ClusterNetworkPolicy CRD (standard channel) of the version go.mod names,
// byte for byte, as Calico v3.32 ships it.
func TestClusterNetworkPolicyCRD(t *testing.T) {
	out, err := exec.Command(goTool(), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/network-policy-api").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(string(bytes.TrimSpace(out)), "config/crd/standard", cnpCRDFile))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("crds", cnpCRDFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("manifests/crds/%s differs from network-policy-api's: run make generate", cnpCRDFile)
	}
}

// cnpCRDFile is the ClusterNetworkPolicy CRD's file, the one CRD not
// made from Tabby's types.
const cnpCRDFile = "policy.networking.k8s.io_clusternetworkpolicies.yaml"

func goTool() string {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		return "go"
	}
	return goBin
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
