package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/datastore/dsconfig"
)

const (
	bigPool   = "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: big}\nspec: {cidr: 10.50.0.0/20, blockSize: 24}\n"
	smallPool = "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: small}\nspec: {cidr: 10.50.0.0/24, blockSize: 28}\n"
	nextPool  = "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: next}\nspec: {cidr: 10.50.16.0/20, blockSize: 24}\n"
)

// TestValidateOverlappingPools: pools valid one by one but overlapping
// each other are refused offline, within a file and across files, naming
// both pools as Calico's datastore check does.
func TestValidateOverlappingPools(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	both := write("both.yaml", bigPool+"---\n"+smallPool)
	big := write("big.yaml", bigPool)
	small := write("small.yaml", smallPool)
	apart := write("apart.yaml", bigPool+"---\n"+nextPool)
	twice := write("twice.yaml", bigPool+"---\n"+bigPool)
	msg := "IPPool small: spec.cidr: IPPool(small) CIDR overlaps with IPPool(big) CIDR 10.50.0.0/20"
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"one file", []string{"validate", "-f", both}, 1, both + ": " + msg},
		{"two files", []string{"validate", "-f", big, "-f", small}, 1, small + ": " + msg},
		{"a directory", []string{"validate", "-f", dir}, 1, "IPPool(small) CIDR overlaps with IPPool(big)"},
		{"adjacent pools", []string{"validate", "-f", apart}, 0, ""},
		{"the same pool twice", []string{"validate", "-f", twice}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Execute(tc.args, &out, &errOut, dsconfig.Backends{})
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.wantCode, errOut.String())
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.wantErr)
			}
			if tc.wantCode != 0 && !strings.Contains(errOut.String(), "invalid resource(s)") {
				t.Errorf("stderr %q does not count the invalid resource", errOut.String())
			}
		})
	}
}

// TestCreateOverlappingPoolsWritesNothing: create -f with two overlapping
// pools is refused before the datastore is even configured.
func TestCreateOverlappingPoolsWritesNothing(t *testing.T) {
	out, code := runLocal(t, bigPool+"---\n"+smallPool, "", nil, "create", "-f", "-")
	if code != 1 || !strings.Contains(out, "nothing was changed") ||
		!strings.Contains(out, `-: document 2 (IPPool "small"): spec.cidr: IPPool(small) CIDR overlaps with IPPool(big) CIDR 10.50.0.0/20`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
