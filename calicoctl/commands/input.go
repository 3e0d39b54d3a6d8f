package commands

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// inputResource is one resource read from -f, with where it came from.
type inputResource struct {
	file string
	doc  int
	r    v3.Resource
}

func (in inputResource) where() string {
	return fmt.Sprintf("%s: document %d (%s %q)", in.file, in.doc, v3.KindOf(in.r), in.r.GetName())
}

// readInputs reads every -f source (file, directory of *.yaml/*.yml/*.json,
// or - for stdin), decodes every document strictly and, when validate is
// set, defaults and validates every resource. It reports every problem it
// finds, and returns nothing unless all of it is good: a later bad
// document means nothing is written.
func (a *app) readInputs(sources []string, validate bool) ([]inputResource, error) {
	if len(sources) == 0 {
		return nil, fmt.Errorf("no input: pass -f FILE, -f DIR or -f -")
	}
	var files []string
	for _, s := range sources {
		expanded, err := expandSource(s)
		if err != nil {
			return nil, err
		}
		files = append(files, expanded...)
	}
	var out []inputResource
	var problems []string
	for _, f := range files {
		data, err := a.readSource(f)
		if err != nil {
			return nil, err
		}
		docs, err := v3.DecodeYAMLDocuments(data)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		for _, d := range docs {
			out = append(out, inputResource{file: f, doc: d.Doc, r: d.Resource})
		}
	}
	if validate {
		for _, in := range out {
			c := in.r.DeepCopyObject().(v3.Resource)
			if err := v3.DefaultValidateForWrite(c); err != nil {
				for _, fe := range err.(v3.ErrorList) {
					problems = append(problems, fmt.Sprintf("%s: %s", in.where(), fe.Error()))
				}
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("nothing was changed; fix these first:\n  %s", strings.Join(problems, "\n  "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no resources found in %s", strings.Join(sources, ", "))
	}
	return out, nil
}

func expandSource(s string) ([]string, error) {
	if s == "-" {
		return []string{"-"}, nil
	}
	st, err := os.Stat(s)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s, err)
	}
	if !st.IsDir() {
		return []string{s}, nil
	}
	var found []string
	for _, pat := range []string{"*.yaml", "*.yml", "*.json"} {
		m, _ := filepath.Glob(filepath.Join(s, pat))
		found = append(found, m...)
	}
	sort.Strings(found)
	if len(found) == 0 {
		return nil, fmt.Errorf("directory %s has no *.yaml, *.yml or *.json files", s)
	}
	return found, nil
}

func (a *app) readSource(f string) ([]byte, error) {
	if f == "-" {
		return io.ReadAll(a.stdin)
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", f, err)
	}
	return data, nil
}
