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
