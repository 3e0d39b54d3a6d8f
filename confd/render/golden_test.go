package render

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v3 "github.com/tabbynet/tabby/api/v3"
)

var update = flag.Bool("update", false, "rewrite the golden bird.conf files in testdata/")

// testSecrets are the resolved Secrets every scenario may reference.
var testSecrets = map[SecretRef]string{
	{Name: "bgp-secrets", Key: "mesh"}: "mesh-pass",
	{Name: "bgp-secrets", Key: "tor"}:  "tor-pass",
}

// scenario reads testdata/<name>.yaml: api/v3 resources, with header
// comments "# node: <name>" (required) and "# routerID: <value>".
func scenario(t *testing.T, path string) Input {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := v3.DecodeYAML(data)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	for _, r := range rs {
		r.Default() // as stored: the datastore defaults on write
		if errs := r.Validate(); len(errs) > 0 {
			t.Fatalf("%s: %s %q is invalid: %v", path, r.GetObjectKind().GroupVersionKind().Kind, r.GetName(), errs)
		}
	}
	var node, rid string
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "# node: "); ok {
			node = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "# routerID: "); ok {
			rid = strings.TrimSpace(v)
		}
	}
	if node == "" {
		t.Fatalf("%s: missing '# node: <name>' header", path)
	}
	in, err := FromResources(node, rs)
	if err != nil {
		t.Fatal(err)
	}
	in.Secrets = testSecrets
	in.RouterID = rid
	return in
}

func scenarios(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("want at least 12 scenarios, have %d", len(files))
	}
	return files
}

func TestGolden(t *testing.T) {
	for _, f := range scenarios(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			in := scenario(t, f)
			got, err := Render(in)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			golden := strings.TrimSuffix(f, ".yaml") + ".bird.conf"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s differs (-want +got), run with -update if intended:\n%s", golden, diff)
			}
			// Deterministic: a second render with the input reversed is identical.
			again, err := Render(reversed(in))
			if err != nil {
				t.Fatal(err)
			}
			if again != got {
				t.Errorf("render depends on input order:\n%s", cmp.Diff(got, again))
			}
		})
	}
}

// TestGoldenParsesWithBIRD runs `bird -p -c` on every golden file: the
// renderer's output must be a configuration stock BIRD 2 accepts.
func TestGoldenParsesWithBIRD(t *testing.T) {
	birdBin, err := exec.LookPath("bird")
	if err != nil {
		t.Fatalf("bird (Debian package bird2) is required to check the golden files: %v", err)
	}
	files, err := filepath.Glob("testdata/*.bird.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("want at least 12 golden files, have %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			abs, err := filepath.Abs(f)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd := exec.Command(birdBin, "-p", "-c", abs)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("bird -p -c %s: %v\n%s", abs, err, out.String())
			}
		})
	}
}

func reversed(in Input) Input {
	rev := func(n int, swap func(i, j int)) {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			swap(i, j)
		}
	}
	out := in
	out.Nodes = append([]v3.Node(nil), in.Nodes...)
	rev(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] })
	out.Peers = append([]v3.BGPPeer(nil), in.Peers...)
	rev(len(out.Peers), func(i, j int) { out.Peers[i], out.Peers[j] = out.Peers[j], out.Peers[i] })
	out.Pools = append([]v3.IPPool(nil), in.Pools...)
	rev(len(out.Pools), func(i, j int) { out.Pools[i], out.Pools[j] = out.Pools[j], out.Pools[i] })
	out.Affinities = append([]v3.BlockAffinity(nil), in.Affinities...)
	rev(len(out.Affinities), func(i, j int) { out.Affinities[i], out.Affinities[j] = out.Affinities[j], out.Affinities[i] })
	out.Filters = append([]v3.BGPFilter(nil), in.Filters...)
	rev(len(out.Filters), func(i, j int) { out.Filters[i], out.Filters[j] = out.Filters[j], out.Filters[i] })
	return out
}
