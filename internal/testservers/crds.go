package testservers

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// ApplyCRDs creates every CRD in dir on the server and waits until each is
// Established, failing the test with the CRD's name if the server rejects
// one: this is what proves the API server accepts Tabby's CRDs.
func ApplyCRDs(t testing.TB, rc *rest.Config, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in manifests/crds (run make generate): %v", err)
	}
	cs := apiextensions.NewForConfigOrDie(rc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s is not a CustomResourceDefinition: %v", f, err)
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the API server rejected CRD %s (%s): %v", crd.Name, filepath.Base(f), err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		for {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("CRD %s: %v", name, err)
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					t.Fatalf("CRD %s: names not accepted: %s", name, c.Message)
				}
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if established {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("CRD %s never became Established: %+v", name, crd.Status.Conditions)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
