package kdd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/datastore/dsconfig"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: "from-kubeconfig"}
contexts:
- name: ctx-a
  context: {cluster: a, user: u}
- name: ctx-b
  context: {cluster: b, user: u}
current-context: ctx-a
`

// TestRESTConfig: Calico's KubeConfig settings all reach the client:
// kubeconfig path or inline content, k8sCurrentContext, k8sAPIEndpoint
// with a token and no kubeconfig, the endpoint and credentials laid over a
// kubeconfig, and the aggregated API group refused.
func TestRESTConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		spec        dsconfig.Spec
		host, token string
		wantErr     string
	}{
		{"path, its current context", dsconfig.Spec{Kubeconfig: path}, "https://a.example:6443", "from-kubeconfig", ""},
		{"path, k8sCurrentContext", dsconfig.Spec{Kubeconfig: path, K8sCurrentContext: "ctx-b"}, "https://b.example:6443", "from-kubeconfig", ""},
		{"inline, k8sCurrentContext", dsconfig.Spec{KubeconfigInline: twoContexts, K8sCurrentContext: "ctx-b"}, "https://b.example:6443", "from-kubeconfig", ""},
		{"endpoint and token, no kubeconfig", dsconfig.Spec{K8sAPIEndpoint: "https://c.example:6443", K8sAPIToken: "t0k"}, "https://c.example:6443", "t0k", ""},
		{"endpoint and token over a kubeconfig", dsconfig.Spec{Kubeconfig: path, K8sAPIEndpoint: "https://d.example:6443", K8sAPIToken: "t1k"}, "https://d.example:6443", "t1k", ""},
		{"unknown context", dsconfig.Spec{Kubeconfig: path, K8sCurrentContext: "nope"}, "", "", "nope"},
		{"bad inline", dsconfig.Spec{KubeconfigInline: "{not yaml"}, "", "", "kubeconfigInline"},
		{"aggregated API group", dsconfig.Spec{Kubeconfig: path, CalicoAPIGroup: "projectcalico.org/v3"}, "", "", "calicoAPIGroup"},
		{"the CRD group", dsconfig.Spec{Kubeconfig: path, CalicoAPIGroup: "crd.projectcalico.org/v1"}, "https://a.example:6443", "from-kubeconfig", ""},
	}
	for _, tt := range tests {
		rc, err := RESTConfig(tt.spec)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v, want an error naming %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if rc.Host != tt.host || rc.BearerToken != tt.token {
			t.Errorf("%s: host %q token %q, want %q %q", tt.name, rc.Host, rc.BearerToken, tt.host, tt.token)
		}
	}
	// k8sClientQPS/Burst reach the client.
	c, err := FromSpec(dsconfig.Spec{Kubeconfig: path, K8sClientQPS: 7, K8sClientBurst: 9})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.(*Client).qps; got != [2]float32{7, 9} {
		t.Errorf("QPS/Burst %v, want 7/9", got)
	}
}
