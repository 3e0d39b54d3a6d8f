package commands

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"text/template"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// printer renders resources in one of calicoctl's output formats: ps
// (table), wide, custom-columns=H1,H2, go-template=T, go-template-file=F,
// yaml, json, and name.
type printer struct {
	format   string   // ps, wide, custom, template, yaml, json, name
	headings []string // custom-columns
	tmpl     string   // go-template (the file's text for go-template-file)
	// withNS adds a NAMESPACE column to tables of namespaced kinds (Calico:
	// when -n or -A was given).
	withNS bool
	// revision is the listed kind's revision, shown as a List's
	// metadata.resourceVersion.
	revision string
}

// newPrinter parses -o as Calico's calicoctl does, with its messages.
func newPrinter(output string, withNS bool) (*printer, error) {
	switch output {
	case "ps", "wide", "json", "name":
		return &printer{format: output, withNS: withNS}, nil
	case "yaml", "yml":
		return &printer{format: "yaml"}, nil
	}
	key, value, _ := strings.Cut(output, "=")
	switch key {
	case "go-template":
		if value == "" {
			return nil, fmt.Errorf("need to specify a template")
		}
		return &printer{format: "template", tmpl: value}, nil
	case "go-template-file":
		if value == "" {
			return nil, fmt.Errorf("need to specify a template file")
		}
		b, err := os.ReadFile(value)
		if err != nil {
			return nil, fmt.Errorf("reading the template file: %w", err)
		}
		return &printer{format: "template", tmpl: string(b)}, nil
	case "custom-columns":
		if value == "" {
			return nil, fmt.Errorf("need to specify at least one column")
		}
		return &printer{format: "custom", headings: strings.Split(value, ",")}, nil
	}
	return nil, fmt.Errorf("unrecognized output format '%s'", output)
}

// print writes items. listed says they are the result of listing a kind
// (Calico prints one List object, one table); otherwise they are the
// objects asked for by name (one object, or each in turn). config answers
// {{config "asnumber"}} in templates.
func (p *printer) print(w io.Writer, info v3.KindInfo, items []v3.Resource, listed bool, config func(string) string) error {
	switch p.format {
	case "yaml", "json":
		return p.printDocument(w, info, items, listed)
	case "name":
		for _, it := range items {
			fmt.Fprintln(w, it.GetName())
		}
		return nil
	case "template":
		t, err := template.New("get").Funcs(templateFuncs(config)).Parse(p.tmpl)
		if err != nil {
			return fmt.Errorf("parsing the template: %w", err)
		}
		var data []runtime.Object
		if listed {
			l, err := listOf(info, items)
			if err != nil {
				return err
			}
			if la, err := meta.ListAccessor(l); err == nil {
				la.SetResourceVersion(p.revision)
			}
			data = []runtime.Object{l}
		} else {
			for _, it := range items {
				data = append(data, it)
			}
		}
		return t.Execute(w, data)
	}
	table := tableFor(info.Kind)
	headings := p.headings
	if headings == nil {
		headings = table.headers
		if p.format == "wide" {
			headings = table.wide
		}
	}
	headings, row, err := table.rowTemplate(headings, p.withNS)
	if err != nil {
		return err
	}
	t, err := template.New("row").Funcs(templateFuncs(config)).Parse(row)
	if err != nil {
		return err
	}
	groups := [][]v3.Resource{items}
	if !listed {
		groups = nil
		for _, it := range items {
			groups = append(groups, []v3.Resource{it})
		}
	}
	for _, g := range groups {
		tw := tabwriter.NewWriter(w, 5, 1, 3, ' ', 0)
		fmt.Fprintln(tw, strings.Join(headings, "\t")+"\t")
		for _, it := range g {
			if err := t.Execute(tw, it); err != nil {
				return fmt.Errorf("printing %s %q: %w", info.Kind, it.GetName(), err)
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w) // Calico leaves a blank line after each table
	}
	return nil
}

// listOf builds the kind's List object (e.g. IPPoolList) holding items.
func listOf(info v3.KindInfo, items []v3.Resource) (runtime.Object, error) {
	l := info.NewList()
	objs := make([]runtime.Object, len(items))
	for i, it := range items {
		objs[i] = it
	}
	if err := meta.SetList(l, objs); err != nil {
		return nil, fmt.Errorf("building the %s list: %w", info.Kind, err)
	}
	return l, nil
}

func (p *printer) printDocument(w io.Writer, info v3.KindInfo, items []v3.Resource, listed bool) error {
	var doc any
	switch {
	case !listed && len(items) == 1:
		js, err := v3.EncodeJSON(items[0])
		if err != nil {
			return err
		}
		doc = json.RawMessage(js)
	case !listed:
		// Several resources asked for by name: Calico prints them as a
		// sequence, not a List.
		seq := []json.RawMessage{}
		for _, it := range items {
			js, err := v3.EncodeJSON(it)
			if err != nil {
				return err
			}
			seq = append(seq, js)
		}
		doc = seq
	default:
		list := struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   *metav1.ListMeta  `json:"metadata,omitempty"`
			Items      []json.RawMessage `json:"items"`
		}{APIVersion: v3.GroupVersion, Kind: info.Kind + "List", Items: []json.RawMessage{}}
		if p.revision != "" {
			list.Metadata = &metav1.ListMeta{ResourceVersion: p.revision}
		}
		for _, it := range items {
			js, err := v3.EncodeJSON(it)
			if err != nil {
				return err
			}
			list.Items = append(list.Items, js)
		}
		doc = list
	}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if p.format == "json" {
		_, err = fmt.Fprintf(w, "%s\n", js)
		return err
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}
