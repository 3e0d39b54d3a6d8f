package dsconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func envFrom(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "calicoctl.cfg")
	os.WriteFile(file, []byte(`apiVersion: projectcalico.org/v3
kind: CalicoAPIConfig
metadata: {}
spec:
  datastoreType: etcdv3
  etcdEndpoints: http://10.0.0.1:2379, http://10.0.0.2:2379
`), 0o644)
	badFile := filepath.Join(dir, "bad.cfg")
	os.WriteFile(badFile, []byte("apiVersion: projectcalico.org/v3\nkind: CalicoAPIConfig\nspec:\n  datastoretype: etcdv3\n"), 0o644)
	missing := filepath.Join(dir, "missing.cfg")

	tests := []struct {
		name     string
		path     string
		explicit bool
		env      map[string]string
		wantType string
		wantEps  string
		wantErr  string
	}{
		{name: "file", path: file, wantType: "etcdv3", wantEps: "http://10.0.0.1:2379,http://10.0.0.2:2379"},
		{name: "env overrides file", path: file, env: map[string]string{"ETCD_ENDPOINTS": "http://127.0.0.1:1"}, wantType: "etcdv3", wantEps: "http://127.0.0.1:1"},
		{name: "env only etcd", path: missing, env: map[string]string{"ETCD_ENDPOINTS": "http://127.0.0.1:2379"}, wantType: "etcdv3", wantEps: "http://127.0.0.1:2379"},
		{name: "env only kubeconfig", path: missing, env: map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": "/k"}, wantType: "kubernetes"},
		{name: "nothing", path: missing, wantErr: "no datastore configured: set DATASTORE_TYPE"},
		{name: "explicit missing file", path: missing, explicit: true, wantErr: "reading config file"},
		{name: "unknown field", path: badFile, wantErr: `unknown field "spec.datastoretype"`},
		{name: "bad type", path: missing, env: map[string]string{"DATASTORE_TYPE": "consul"}, wantErr: `datastoreType "consul" is not supported`},
		{name: "etcd without endpoints", path: missing, env: map[string]string{"DATASTORE_TYPE": "etcdv3"}, wantErr: "needs etcdEndpoints"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Load(tc.path, tc.explicit, envFrom(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if spec.DatastoreType != tc.wantType || strings.Join(spec.Endpoints(), ",") != tc.wantEps {
				t.Fatalf("got %s %v", spec.DatastoreType, spec.Endpoints())
			}
		})
	}
	_, err := Load(missing, false, envFrom(nil))
	if !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("not ErrNotConfigured: %v", err)
	}
}
