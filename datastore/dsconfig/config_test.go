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

// TestEtcdSecuritySettings: every etcd security setting of Calico's
// CalicoAPIConfig (file) and environment reaches the etcd client
// configuration.
func TestEtcdSecuritySettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "calicoctl.cfg")
	doc := `apiVersion: projectcalico.org/v3
kind: CalicoAPIConfig
metadata: {}
spec:
  datastoreType: etcdv3
  etcdDiscoverySrv: example.com
  etcdUsername: calico
  etcdPassword: pw
  etcdCACert: CA-PEM
  etcdCert: CERT-PEM
  etcdKey: KEY-PEM
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	spec, err := Load(file, true, envFrom(nil))
	if err != nil {
		t.Fatal(err)
	}
	cfg := spec.EtcdConfig()
	if cfg.DiscoverySrv != "example.com" || cfg.Username != "calico" || cfg.Password != "pw" ||
		cfg.TLS.CA != "CA-PEM" || cfg.TLS.Cert != "CERT-PEM" || cfg.TLS.Key != "KEY-PEM" {
		t.Errorf("file settings not carried: %+v", cfg)
	}
	spec, err = Load(filepath.Join(t.TempDir(), "none"), false, envFrom(map[string]string{
		"ETCD_DISCOVERY_SRV": "srv.example", "ETCD_USERNAME": "u", "ETCD_PASSWORD": "p",
		"ETCD_CA_CERT_FILE": "/ca", "ETCD_CERT_FILE": "/c", "ETCD_KEY_FILE": "/k",
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg = spec.EtcdConfig()
	if spec.DatastoreType != TypeEtcdV3 || cfg.DiscoverySrv != "srv.example" || cfg.Username != "u" || cfg.Password != "p" ||
		cfg.TLS.CAFile != "/ca" || cfg.TLS.CertFile != "/c" || cfg.TLS.KeyFile != "/k" {
		t.Errorf("environment not carried: %s %+v", spec.DatastoreType, cfg)
	}
}
