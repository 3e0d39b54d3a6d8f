package commands

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/datastore/dsconfig"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nmetadata:\n  name: default\n"), 0o644)
	os.WriteFile(bad, []byte("apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nmetadata:\n  name: other\n"), 0o644)

	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"valid file", []string{"validate", "-f", good}, 0, "ClusterInformation default: valid", ""},
		{"invalid file", []string{"validate", "-f", bad}, 1, "", `metadata.name: must be "default"`},
		{"directory", []string{"validate", "-f", dir}, 1, "valid", "1 invalid resource(s)"},
		{"no input", []string{"validate"}, 1, "", "no input"},
		{"missing file", []string{"validate", "-f", filepath.Join(dir, "nope.yaml")}, 1, "", "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Execute(tc.args, &out, &errOut, dsconfig.Backends{})
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.wantCode, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("stdout %q lacks %q", out.String(), tc.wantOut)
			}
			if !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stderr %q lacks %q", errOut.String(), tc.wantErr)
			}
		})
	}
}
