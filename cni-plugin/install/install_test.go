package install

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// fakeImage makes a source folder like the image's /opt/cni/bin.
func fakeImage(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("binary "+n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// noTemps fails when a temporary file was left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

func TestInstallBinariesModesAndSkip(t *testing.T) {
	src := fakeImage(t, "calico", "calico-ipam", "calico-k8s", "portmap", "bandwidth")
	dst := filepath.Join(t.TempDir(), "bin")
	got, err := InstallBinaries(src, dst, []string{"bandwidth"}, true)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"calico", "calico-ipam", "calico-k8s", "portmap"}; !slices.Equal(got, want) {
		t.Fatalf("installed %v, want %v", got, want)
	}
	for _, n := range got {
		if m := mode(t, filepath.Join(dst, n)); m != 0o755 {
			t.Errorf("%s: mode %o, want 755", n, m)
		}
		data, _ := os.ReadFile(filepath.Join(dst, n))
		if string(data) != "binary "+n {
			t.Errorf("%s: content %q", n, data)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "bandwidth")); !os.IsNotExist(err) {
		t.Errorf("skipped bandwidth was installed: %v", err)
	}
	noTemps(t, dst)
}

// TestInstallBinariesReplacesAtomically: an installed binary is replaced
// by a rename, never rewritten in place: a runtime that has the old file
// open (running it) keeps reading the old, whole content.
func TestInstallBinariesReplacesAtomically(t *testing.T) {
	dst := t.TempDir()
	old := filepath.Join(dst, "calico")
	if err := os.WriteFile(old, []byte("old calico binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	running, err := os.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Close()
	before, _ := os.Stat(old)

	if _, err := InstallBinaries(fakeImage(t, "calico", "calico-ipam", "calico-k8s"), dst, nil, true); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(old)
	if os.SameFile(before, after) {
		t.Fatal("calico was rewritten in place, not replaced")
	}
	buf := make([]byte, 64)
	n, _ := running.ReadAt(buf, 0)
	if string(buf[:n]) != "old calico binary" {
		t.Fatalf("the open old binary now reads %q", buf[:n])
	}
	if data, _ := os.ReadFile(old); string(data) != "binary calico" {
		t.Fatalf("new content %q", data)
	}
	noTemps(t, dst)
}

func TestInstallBinariesNoUpdateKeepsExisting(t *testing.T) {
	dst := t.TempDir()
	if err := os.WriteFile(filepath.Join(dst, "calico"), []byte("mine"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := InstallBinaries(fakeImage(t, "calico", "calico-ipam", "calico-k8s"), dst, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got, "calico") {
		t.Errorf("UPDATE_CNI_BINARIES=false replaced calico")
	}
	if data, _ := os.ReadFile(filepath.Join(dst, "calico")); string(data) != "mine" {
		t.Errorf("calico is now %q", data)
	}
}

func TestInstallBinariesRefusesIncompleteImage(t *testing.T) {
	dst := t.TempDir()
	_, err := InstallBinaries(fakeImage(t, "calico", "calico-k8s"), dst, nil, true)
	if err == nil || !strings.Contains(err.Error(), "calico-ipam") {
		t.Fatalf("want an error naming calico-ipam, got %v", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 0 {
		t.Errorf("something was installed from an incomplete image: %v", entries)
	}
}

// TestWriteFileAtomicFailureKeepsOld: a write that cannot complete leaves
// the old file and no temporary file.
func TestWriteFileAtomicFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "calico-kubeconfig")
	if err := WriteFileAtomic(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory in the way of the rename makes it fail.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(blocked, []byte("new"), 0o600); err == nil {
		t.Fatal("replacing a non-empty directory succeeded")
	}
	if data, _ := os.ReadFile(path); string(data) != "old" {
		t.Errorf("old file now %q", data)
	}
	noTemps(t, dir)
}

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestInstallWritesConfigFromCalicoEnv: the files land with their modes
// (binaries 0755, the conflist 0644), the template's placeholders filled
// from Calico's variables, portmap chained, the etcd TLS files copied
// (0600) and named by the host's paths.
func TestInstallWritesConfigFromCalicoEnv(t *testing.T) {
	root := t.TempDir()
	tlsDir := filepath.Join(root, "calico-secrets")
	if err := os.MkdirAll(tlsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"etcd-ca", "etcd-cert", "etcd-key"} {
		if err := os.WriteFile(filepath.Join(tlsDir, n), []byte("pem "+n), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	template := `{"name": "k8s-pod-network", "cniVersion": "0.3.1", "plugins": [
	  {"type": "calico", "etcd_endpoints": "__ETCD_ENDPOINTS__", "etcd_ca_cert_file": "__ETCD_CA_CERT_FILE__",
	   "etcd_cert_file": "__ETCD_CERT_FILE__", "etcd_key_file": "__ETCD_KEY_FILE__", "nodename": "__KUBERNETES_NODE_NAME__",
	   "mtu": __CNI_MTU__, "log_level": "__LOG_LEVEL__", "ipam": {"type": "calico-ipam"},
	   "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}},
	  {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}}]}`
	cfg, err := ConfigFromEnv(env(map[string]string{
		"CNI_NETWORK_CONFIG": template, "CNI_MTU": "1440", "KUBERNETES_NODE_NAME": "node-a",
		"ETCD_ENDPOINTS": "https://10.0.0.1:2379", "TLS_ASSETS_DIR": tlsDir, "CNI_CONF_NAME": "10-calico.conflist",
	}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.SourceDir = fakeImage(t, "calico", "calico-ipam", "calico-k8s")
	cfg.BinDir = filepath.Join(root, "host/opt/cni/bin")
	cfg.NetDir = filepath.Join(root, "host/etc/cni/net.d")
	if err := Install(context.Background(), cfg, nil, nil); err != nil {
		t.Fatal(err)
	}
	conflist := filepath.Join(cfg.NetDir, "10-calico.conflist")
	if m := mode(t, conflist); m != 0o644 {
		t.Errorf("conflist mode %o, want 644", m)
	}
	for _, n := range []string{"etcd-ca", "etcd-cert", "etcd-key"} {
		if m := mode(t, filepath.Join(cfg.NetDir, "calico-tls", n)); m != 0o600 {
			t.Errorf("%s mode %o, want 600", n, m)
		}
	}
	data, _ := os.ReadFile(conflist)
	var got struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	c := got.Plugins[0]
	want := map[string]any{
		"etcd_endpoints": "https://10.0.0.1:2379", "etcd_ca_cert_file": "/etc/cni/net.d/calico-tls/etcd-ca",
		"etcd_cert_file": "/etc/cni/net.d/calico-tls/etcd-cert", "etcd_key_file": "/etc/cni/net.d/calico-tls/etcd-key",
		"nodename": "node-a", "mtu": 1440.0, "log_level": "info",
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("%s = %v, want %v", k, c[k], v)
		}
	}
	if kc := c["kubernetes"].(map[string]any)["kubeconfig"]; kc != "/etc/cni/net.d/calico-kubeconfig" {
		t.Errorf("kubeconfig %v", kc)
	}
	if got.Plugins[1]["type"] != "portmap" {
		t.Errorf("portmap not chained: %v", got.Plugins[1])
	}
	noTemps(t, cfg.NetDir)
	noTemps(t, cfg.BinDir)
}

// TestDefaultTemplateRenders: with no CNI_NETWORK_CONFIG, Calico's default
// (Kubernetes datastore, portmap chained).
func TestDefaultTemplateRenders(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{"KUBERNETES_NODE_NAME": "n1"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Values["KUBECONFIG_FILEPATH"] = "/etc/cni/net.d/calico-kubeconfig"
	out, err := RenderNetworkConfig(cfg.Template, cfg.Values)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"datastore_type": "kubernetes"`, `"nodename": "n1"`, `"mtu": 1500`, `"type": "portmap"`} {
		if !strings.Contains(string(out), s) {
			t.Errorf("missing %s in\n%s", s, out)
		}
	}
}

func TestRenderRefusesBadTemplates(t *testing.T) {
	for name, tmpl := range map[string]string{
		"unknown placeholder": `{"name": "n", "type": "calico", "x": "__NOT_A_CALICO_VAR__"}`,
		"not JSON":            `{"name": "n", "type": "calico", "mtu": __CNI_MTU__`,
		"no plugin":           `{"name": "n"}`,
	} {
		if _, err := RenderNetworkConfig(tmpl, map[string]string{"CNI_MTU": "1500"}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestInstallRefusesEmbeddedToken(t *testing.T) {
	cfg, err := ConfigFromEnv(env(map[string]string{"KUBERNETES_NODE_NAME": "n1",
		"CNI_NETWORK_CONFIG": `{"name": "n", "type": "calico", "kubernetes": {"token": "__SERVICEACCOUNT_TOKEN__"}}`}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.SourceDir = fakeImage(t, "calico", "calico-ipam", "calico-k8s")
	cfg.BinDir, cfg.NetDir = t.TempDir(), t.TempDir()
	if err := Install(context.Background(), cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "SERVICEACCOUNT_TOKEN") {
		t.Fatalf("want a refusal naming __SERVICEACCOUNT_TOKEN__, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.NetDir, "10-calico.conflist")); !os.IsNotExist(err) {
		t.Errorf("a conflist was written: %v", err)
	}
}

func TestConfigFromEnvRefusesBadValues(t *testing.T) {
	for _, m := range []map[string]string{
		{"CNI_MTU": "big"}, {"SLEEP": "maybe"}, {"UPDATE_CNI_BINARIES": "yes please"},
	} {
		m["KUBERNETES_NODE_NAME"] = "n"
		if _, err := ConfigFromEnv(env(m)); err == nil {
			t.Errorf("%v accepted", m)
		}
	}
}

// TestKubeconfigMode: the plugin's kubeconfig is 0600 and loads with the
// token and server.
func TestKubeconfigMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), KubeconfigName)
	if err := WriteKubeconfig(path, Cluster{Server: "https://10.96.0.1:443", CAData: []byte("ca")}, "tok-1"); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("mode %o, want 600", m)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if rc.BearerToken != "tok-1" || rc.Host != "https://10.96.0.1:443" || string(rc.CAData) != "ca" {
		t.Errorf("loaded %q %q %q", rc.BearerToken, rc.Host, rc.CAData)
	}
	if _, err := RenderKubeconfig(Cluster{Server: "https://x"}, ""); err == nil {
		t.Error("a kubeconfig without a token was rendered")
	}
}

// TestInstallCalicoK8sAsCalico: with the Kubernetes datastore the calico
// binary would only exec calico-k8s, so calico-k8s is installed as calico
// (one process start per call, not two); with etcd calico stays the lean
// binary, as it does when calico-k8s is skipped or calico was not
// (re)installed by this run.
func TestInstallCalicoK8sAsCalico(t *testing.T) {
	const etcdTemplate = `{"name": "k8s-pod-network", "cniVersion": "1.0.0", "plugins": [
	  {"type": "calico", "etcd_endpoints": "__ETCD_ENDPOINTS__", "nodename": "__KUBERNETES_NODE_NAME__",
	   "ipam": {"type": "calico-ipam"}, "policy": {"type": "k8s"}, "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"}}]}`
	for _, tc := range []struct {
		name     string
		env      map[string]string
		existing bool // calico already installed, UPDATE_CNI_BINARIES=false
		want     string
	}{
		{"kubernetes datastore", nil, false, "binary calico-k8s"},
		{"etcd", map[string]string{"CNI_NETWORK_CONFIG": etcdTemplate, "ETCD_ENDPOINTS": "https://10.0.0.1:2379"}, false, "binary calico"},
		{"calico-k8s skipped", map[string]string{"SKIP_CNI_BINARIES": "calico-k8s"}, false, "binary calico"},
		{"calico kept", map[string]string{"UPDATE_CNI_BINARIES": "false"}, true, "binary old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{"KUBERNETES_NODE_NAME": "n1"}
			for k, v := range tc.env {
				m[k] = v
			}
			cfg, err := ConfigFromEnv(env(m))
			if err != nil {
				t.Fatal(err)
			}
			cfg.SourceDir = fakeImage(t, "calico", "calico-ipam", "calico-k8s")
			cfg.BinDir, cfg.NetDir = t.TempDir(), t.TempDir()
			cfg.TLSAssetsDir = filepath.Join(t.TempDir(), "none")
			if tc.existing {
				if err := os.WriteFile(filepath.Join(cfg.BinDir, "calico"), []byte("binary old"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := Install(context.Background(), cfg, nil, nil); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(cfg.BinDir, "calico"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("calico is %q, want %q", got, tc.want)
			}
			if m := mode(t, filepath.Join(cfg.BinDir, "calico")); m != 0o755 {
				t.Errorf("calico mode %o", m)
			}
			noTemps(t, cfg.BinDir)
		})
	}
}
