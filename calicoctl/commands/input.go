package commands

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

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
//
// As Calico's: a directory is read one level deep unless recursive (-R);
// a file without resources is an error ("no resources specified in file
// F", or "... in directory D" when a whole directory has none) unless
// skipEmpty (--skip-empty), in which case nothing at all is (nil, nil).
func (a *app) readInputs(sources []string, o inputOptions) ([]inputResource, error) {
	if len(sources) == 0 {
		return nil, fmt.Errorf("no input: pass -f FILE, -f DIR or -f -")
	}
	var out []inputResource
	var problems []string
	for _, s := range sources {
		files, err := expandSource(s, o.recursive)
		if err != nil {
			return nil, err
		}
		before := len(out)
		for _, f := range files {
			data, err := a.readSource(f)
			if err != nil {
				return nil, err
			}
			if data, err = expandSequences(data); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", f, err))
				continue
			}
			docs, err := v3.DecodeYAMLDocuments(data)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", f, err))
				continue
			}
			if len(docs) == 0 && !o.skipEmpty {
				return nil, fmt.Errorf("no resources specified in file %s", f)
			}
			for _, d := range docs {
				out = append(out, inputResource{file: f, doc: d.Doc, r: d.Resource})
			}
		}
		if len(out) == before && len(problems) == 0 && !o.skipEmpty {
			return nil, fmt.Errorf("no resources specified in directory %s", s)
		}
	}
	validate := o.validate
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
	return out, nil
}

// inputOptions are the -f reading options of a command.
type inputOptions struct {
	validate, recursive, skipEmpty bool
}

func expandSource(s string, recursive bool) ([]string, error) {
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
	err = filepath.WalkDir(s, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != s && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading directory %s: %w", s, err)
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

// expandSequences turns every document that is a sequence of resources
// (what get -o yaml|json prints for several named resources, as Calico's
// does) into one document per resource, so that output can be applied
// again.
func expandSequences(data []byte) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out bytes.Buffer
	changed := false
	for {
		raw, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil || !bytes.HasPrefix(bytes.TrimSpace(js), []byte("[")) {
			out.Write(raw)
			out.WriteString("\n---\n")
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(js, &items); err != nil {
			return nil, fmt.Errorf("a sequence that is not of resources: %w", err)
		}
		changed = true
		for _, it := range items {
			out.Write(it)
			out.WriteString("\n---\n")
		}
	}
	if !changed {
		return data, nil
	}
	return out.Bytes(), nil
}
