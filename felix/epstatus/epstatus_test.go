package epstatus

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func TestFilenameIsCalicos(t *testing.T) {
	wep := &v3.WorkloadEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "x"},
		Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Pod: "web 1", Workload: "default.web 1", Endpoint: "eth0"}}
	if got, want := Filename(wep), "k8s default%2Fweb%201 eth0"; got != want {
		t.Errorf("Filename = %q, want %q", got, want)
	}
	wep.Spec.Orchestrator, wep.Spec.Pod, wep.Spec.Workload = "cni", "", "c1"
	if got, want := Filename(wep), "cni default%2Fc1 eth0"; got != want {
		t.Errorf("Filename (not k8s) = %q, want %q", got, want)
	}
}

func files(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

// TestReporterWritesOnlyProgrammedEndpoints: a file appears only once the
// generation that first held its endpoint is applied, stays while the
// endpoint stays, and goes with it; files left by an earlier run are
// judged only after the first Desired.
func TestReporterWritesOnlyProgrammedEndpoints(t *testing.T) {
	prefix := t.TempDir()
	dir := filepath.Join(prefix, DirName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := NewReporter(prefix, nil)
	sync := func() {
		t.Helper()
		if err := r.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	if got := files(t, dir); !slices.Equal(got, []string{"stale"}) {
		t.Fatalf("before the first Desired: %v", got)
	}
	r.Desired(1, []string{"a"})
	sync()
	if got := files(t, dir); len(got) != 0 {
		t.Fatalf("generation 1 not applied yet: %v, want none (stale removed)", got)
	}
	r.Applied(1)
	r.Desired(2, []string{"a", "b"})
	sync()
	if got := files(t, dir); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after applying 1: %v, want [a]", got)
	}
	r.Applied(2)
	sync()
	if got := files(t, dir); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after applying 2: %v", got)
	}
	r.Desired(3, []string{"b"})
	sync()
	if got := files(t, dir); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a removed: %v", got)
	}
}
