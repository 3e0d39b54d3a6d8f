package commands

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

var (
	uidRE  = regexp.MustCompile(`(?m)(uid|"uid"): "?[0-9a-f-]{36}"?`)
	rvRE   = regexp.MustCompile(`(?m)(resourceVersion|"resourceVersion"): "[0-9]+"`)
	tsRE   = regexp.MustCompile(`(?m)(creationTimestamp|"creationTimestamp"): "?[0-9TZ:-]+"?`)
	portRE = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
	// slog's text lines (--log-level) start with the time.
	logTimeRE = regexp.MustCompile(`(?m)^time=\S+ `)
	// Calico's words wrap the datastore's own error, which differs
	// between etcd (none) and Kubernetes (the API server's); the golden
	// table of words_integration_test.go checks both exactly.
	apiErrRE = regexp.MustCompile(`with error: (<nil>|[a-z]+(\.crd\.projectcalico\.org)? "[^"]*" (not found|already exists))`)
)

// normalise replaces what changes from run to run.
func normalise(s string) string {
	s = uidRE.ReplaceAllString(s, `$1: <uid>`)
	s = rvRE.ReplaceAllString(s, `$1: <rv>`)
	s = tsRE.ReplaceAllString(s, `$1: <timestamp>`)
	s = logTimeRE.ReplaceAllString(s, "time=<time> ")
	s = apiErrRE.ReplaceAllString(s, "with error: <datastore's error>")
	return portRE.ReplaceAllString(s, "127.0.0.1:<port>")
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	got = normalise(got)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs from golden (-want +got):\n%s", path, d)
	}
}
