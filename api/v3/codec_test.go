package v3

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"missing apiVersion", "kind: ClusterInformation\nmetadata: {name: default}\n", "document 1 (ClusterInformation \"default\"): apiVersion is required"},
		{"foreign apiVersion", "apiVersion: v1\nkind: ClusterInformation\nmetadata: {name: default}\n", `apiVersion "v1" is not supported (use projectcalico.org/v3)`},
		{"crd apiVersion", "apiVersion: crd.projectcalico.org/v1\nkind: ClusterInformation\n", `apiVersion "crd.projectcalico.org/v1" is not supported`},
		{"missing kind", "apiVersion: projectcalico.org/v3\nmetadata: {name: x}\n", "kind is required"},
		{"unknown kind", "apiVersion: projectcalico.org/v3\nkind: Frobnicator\n", `unknown kind "Frobnicator" (known kinds: `},
		{"unknown field", "apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nmetadata: {name: default}\nspec: {clusterGuid: x}\n", `unknown field "spec.clusterGuid"`},
		{"wrong type", "apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nmetadata: {name: default}\nspec: {datastoreReady: yes-please}\n", "spec.datastoreReady: cannot use a string here"},
		{"duplicate key", "apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nkind: ClusterInformation\n", "not valid YAML"},
		{"bad yaml", "apiVersion: [\n", "document 1"},
		{"second document", "apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nmetadata: {name: default}\n---\napiVersion: projectcalico.org/v3\nkind: Nope\n", "document 2 (Nope)"},
		{"bad list item", "apiVersion: projectcalico.org/v3\nkind: List\nitems:\n- apiVersion: projectcalico.org/v3\n  kind: Nope\n", "items[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeYAML([]byte(tc.in))
			if err == nil {
				t.Fatalf("decoded; want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestDecodeUnknownKindIsSentinel(t *testing.T) {
	_, err := DecodeYAML([]byte("apiVersion: projectcalico.org/v3\nkind: Nope\n"))
	if !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("error %v is not ErrUnknownKind", err)
	}
}

func TestDecodeMultiDocumentAndLists(t *testing.T) {
	in := `# leading comment only document
---
apiVersion: projectcalico.org/v3
kind: ClusterInformation
metadata:
  name: default
spec:
  clusterGUID: abc
---
---
apiVersion: projectcalico.org/v3
kind: ClusterInformationList
items:
- apiVersion: projectcalico.org/v3
  kind: ClusterInformation
  metadata:
    name: a
- apiVersion: projectcalico.org/v3
  kind: ClusterInformation
  metadata:
    name: b
`
	rs, err := DecodeYAML([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.GetName())
	}
	if got := strings.Join(names, ","); got != "default,a,b" {
		t.Fatalf("decoded names %q, want default,a,b", got)
	}
	if ci := rs[0].(*ClusterInformation); ci.Spec.ClusterGUID != "abc" {
		t.Fatalf("clusterGUID %q", ci.Spec.ClusterGUID)
	}
}

func TestEncodeYAMLRoundTrip(t *testing.T) {
	ready := true
	in := &ClusterInformation{Spec: ClusterInformationSpec{ClusterGUID: "g", DatastoreReady: &ready}}
	in.Name = "default"
	out, err := EncodeYAML(in, in)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"apiVersion: projectcalico.org/v3", "kind: ClusterInformation", "datastoreReady: true", "---\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("encoded YAML lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "creationTimestamp") {
		t.Errorf("encoded YAML has an empty creationTimestamp:\n%s", s)
	}
	back, err := DecodeYAML(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[1].(*ClusterInformation).Spec.ClusterGUID != "g" {
		t.Fatalf("round trip gave %#v", back)
	}
}

func TestPathAndErrorList(t *testing.T) {
	p := Path("spec").Child("ingress").Index(2).Child("source").Child("nets").Index(0)
	if p != "spec.ingress[2].source.nets[0]" {
		t.Fatalf("path %q", p)
	}
	if k := Path("metadata").Child("labels").Key("a/b"); k != `metadata.labels["a/b"]` {
		t.Fatalf("key path %q", k)
	}
	var errs ErrorList
	if errs.Err() != nil {
		t.Fatal("empty list is an error")
	}
	errs.Addf("spec.blockSize", "%d is outside 20-32 for an IPv4 pool", 33)
	errs.Add("", "whole object is wrong")
	if got := errs.Err().Error(); got != "spec.blockSize: 33 is outside 20-32 for an IPv4 pool; whole object is wrong" {
		t.Fatalf("error text %q", got)
	}
}
