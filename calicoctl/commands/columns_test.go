package commands

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestKindTablesRender: every cell template of every kind's table runs on
// the api/v3 types (an empty object and every corpus document of the
// kind), so a field Calico's templates name that Tabby's types spell
// differently fails here, not in front of a user.
func TestKindTablesRender(t *testing.T) {
	files, _ := filepath.Glob("../../api/v3/testdata/valid/*.yaml")
	objs := map[string][]v3.Resource{}
	for _, k := range v3.Kinds() {
		objs[k.Kind] = append(objs[k.Kind], k.New())
	}
	for _, f := range files {
		docs, err := v3.DecodeYAMLDocuments([]byte(mustReadFile(t, f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			objs[v3.KindOf(d.Resource)] = append(objs[v3.KindOf(d.Resource)], d.Resource)
		}
	}
	cfg := func(string) string { return "64512" }
	for kind, table := range kindTables {
		info, ok := v3.LookupKind(kind)
		if !ok {
			t.Errorf("%s: not a kind", kind)
			continue
		}
		for _, hs := range [][]string{table.headers, table.wide} {
			for _, h := range hs {
				if _, ok := table.cells[h]; !ok {
					t.Errorf("%s: heading %s has no cell", kind, h)
				}
			}
		}
		var all []string
		for h := range table.cells {
			all = append(all, h)
		}
		p := &printer{format: "custom", headings: all}
		var buf bytes.Buffer
		if err := p.print(&buf, info, objs[kind], true, cfg); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		if strings.Contains(buf.String(), "<no value>") {
			t.Errorf("%s: a cell names a field the type lacks:\n%s", kind, buf.String())
		}
	}
}

// TestNodeASNColumn: a node without its own AS number shows the cluster's
// in parentheses, as Calico's get nodes -o wide does.
func TestNodeASNColumn(t *testing.T) {
	info, _ := v3.LookupKind(v3.KindNode)
	n := info.New().(*v3.Node)
	n.Name = "n1"
	n.Spec.BGP = &v3.NodeBGPSpec{IPv4Address: "10.0.0.1/24"}
	var buf bytes.Buffer
	p, _ := newPrinter("wide", false)
	if err := p.print(&buf, info, []v3.Resource{n}, true, func(string) string { return "64601" }); err != nil {
		t.Fatal(err)
	}
	want := "NAME   ASN       IPV4          IPV6   \nn1     (64601)   10.0.0.1/24          \n\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}
