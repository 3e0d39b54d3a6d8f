package main

import (
	"strings"
	"testing"
)

func TestRewriteMakesIntOrStringStructural(t *testing.T) {
	in := `spec:
  ports:
    items:
      description: a port
      pattern: ^.*
      properties:
        minPort:
          type: integer
      type: object
      x-kubernetes-int-or-string: true
    type: array
`
	out, err := Rewrite([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"anyOf:", "- type: integer", "- type: string", "description: a port", "x-kubernetes-int-or-string: true", "type: array"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"minPort", "pattern", "type: object"} {
		if strings.Contains(got, bad) {
			t.Errorf("output still has %q:\n%s", bad, got)
		}
	}
}

// TestRewriteKeepsStatusOnlyWhereCalicoHasOne: the status of the v3 type
// leaves a CRD whose Calico form has none (with its subresource);
// KubeControllersConfiguration keeps both, as Calico's.
func TestRewriteKeepsStatusOnlyWhereCalicoHasOne(t *testing.T) {
	crd := func(name string) string {
		return `metadata:
  name: ` + name + `
spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            type: object
          status:
            type: object
    subresources:
      status: {}
`
	}
	out, err := Rewrite([]byte(crd("ippools.crd.projectcalico.org")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "status") {
		t.Errorf("ippools keeps a status:\n%s", out)
	}
	out, err = Rewrite([]byte(crd("kubecontrollersconfigurations.crd.projectcalico.org")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(out), "status:") != 2 {
		t.Errorf("kubecontrollersconfigurations lost its status or subresource:\n%s", out)
	}
}
