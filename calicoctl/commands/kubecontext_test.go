package commands

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: ctx-a, context: {cluster: a, user: u}}
- {name: ctx-b, context: {cluster: b, user: u}}
current-context: ctx-a
`

// TestKubeconfigSettings: k8sCurrentContext (--context) picks the
// kubeconfig's context and kubeconfigInline stands for the file; an
// unknown context is refused; without either the backend gets the spec
// untouched.
func TestKubeconfigSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(file, []byte(twoContexts), 0o600)
	var server, path string
	next := func(s dsconfig.Spec) (datastore.Client, error) {
		path = s.Kubeconfig
		cfg, err := clientcmd.LoadFromFile(s.Kubeconfig)
		if err != nil {
			return nil, err
		}
		server = cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server
		return nil, errors.New("stop")
	}
	wrapped := WithKubeconfigSettings(next)
	for _, tc := range []struct {
		name       string
		spec       dsconfig.Spec
		wantServer string
		wantErr    string
	}{
		{name: "file, its current context", spec: dsconfig.Spec{Kubeconfig: file}, wantServer: "https://a.example:6443"},
		{name: "file, --context", spec: dsconfig.Spec{Kubeconfig: file, K8sCurrentContext: "ctx-b"}, wantServer: "https://b.example:6443"},
		{name: "inline", spec: dsconfig.Spec{KubeconfigInline: twoContexts}, wantServer: "https://a.example:6443"},
		{name: "inline, --context", spec: dsconfig.Spec{KubeconfigInline: twoContexts, K8sCurrentContext: "ctx-b"}, wantServer: "https://b.example:6443"},
		{name: "unknown context", spec: dsconfig.Spec{Kubeconfig: file, K8sCurrentContext: "nope"}, wantErr: `context "nope" does not exist`},
		{name: "bad inline", spec: dsconfig.Spec{KubeconfigInline: "{{{"}, wantErr: "kubeconfigInline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, path = "", ""
			_, err := wrapped(tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err == nil || err.Error() != "stop" || server != tc.wantServer {
				t.Fatalf("server %q err %v, want %q", server, err, tc.wantServer)
			}
			if tc.spec.K8sCurrentContext != "" || tc.spec.KubeconfigInline != "" {
				if _, err := os.Stat(path); !os.IsNotExist(err) {
					t.Errorf("resolved kubeconfig %s left behind (%v)", path, err)
				}
			}
		})
	}
}
