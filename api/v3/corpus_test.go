package v3

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestValidCorpus decodes every document in testdata/valid, checks it
// defaults and validates cleanly, and checks that re-encoding the decoded
// (not defaulted) object gives back exactly the input: nothing is lost.
func TestValidCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no valid corpus files")
	}
	seen := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := splitDocs(string(data))
		for i, doc := range docs {
			name := filepath.Base(f) + "#" + strconv.Itoa(i+1)
			t.Run(name, func(t *testing.T) {
				r, err := DecodeOne([]byte(doc))
				if err != nil {
					t.Fatalf("decode: %v", err)
				}
				seen[KindOf(r)]++
				defaulted := r.DeepCopyObject().(Resource)
				if err := DefaultAndValidate(defaulted); err != nil {
					t.Fatalf("validate: %v", err)
				}
				// Defaulting is idempotent.
				again := defaulted.DeepCopyObject().(Resource)
				again.Default()
				if d := cmp.Diff(defaulted, again); d != "" {
					t.Errorf("Default is not idempotent (-once +twice):\n%s", d)
				}
				got, err := EncodeJSON(r)
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				wantJSON, err := yaml.YAMLToJSON([]byte(doc))
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(generic(t, wantJSON), generic(t, got)); d != "" {
					t.Errorf("round trip lost or changed data (-input +re-encoded):\n%s", d)
				}
			})
		}
	}
	for _, k := range Kinds() {
		if seen[k.Kind] == 0 {
			t.Errorf("valid corpus has no %s", k.Kind)
		}
	}
}

var errorLine = regexp.MustCompile(`^# error: (.+)$`)

// TestInvalidCorpus checks that every document in testdata/invalid fails to
// decode or validate with the message its "# error:" line names.
func TestInvalidCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	total := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(string(data)) {
			total++
			name := filepath.Base(f) + "#" + strconv.Itoa(i+1)
			t.Run(name, func(t *testing.T) {
				first, _, _ := strings.Cut(strings.TrimLeft(doc, "\n"), "\n")
				m := errorLine.FindStringSubmatch(strings.TrimSpace(first))
				if m == nil {
					t.Fatalf("document does not start with '# error: <message>': %q", first)
				}
				want := strings.TrimSpace(m[1])
				r, err := DecodeOne([]byte(doc))
				if err == nil {
					err = DefaultAndValidate(r)
				}
				if err == nil {
					t.Fatalf("accepted; want error containing %q", want)
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q\ndoes not contain %q", err, want)
				}
			})
		}
	}
	if total < 40 {
		t.Errorf("invalid corpus has %d documents, want at least 40", total)
	}
}

// splitDocs splits on lines that are exactly "---", dropping empty parts.
func splitDocs(s string) []string {
	var out []string
	var cur []string
	flush := func() {
		d := strings.Join(cur, "\n")
		if !isEmptyDocument([]byte(d)) {
			out = append(out, d+"\n")
		}
		cur = nil
	}
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimRight(line, " \t\r") == "---" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

func generic(t *testing.T, js []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
