package dsconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCalicoKubeConfigFields: every field of Calico's CalicoAPIConfigSpec
// (its KubeConfig part included: k8sClientQPS, k8sCurrentContext,
// calicoAPIGroup, kubeconfigInline, ...) is accepted in the file, and
// their environment variables override it; a malformed number in the
// environment is refused, not dropped.
func TestCalicoKubeConfigFields(t *testing.T) {
	file := filepath.Join(t.TempDir(), "calicoctl.cfg")
	os.WriteFile(file, []byte(`apiVersion: projectcalico.org/v3
kind: CalicoAPIConfig
metadata: {}
spec:
  datastoreType: kubernetes
  kubeconfig: /root/.kube/config
  kubeconfigInline: "apiVersion: v1\nkind: Config\n"
  k8sAPIEndpoint: https://10.0.0.1:6443
  k8sKeyFile: /k.key
  k8sCertFile: /k.crt
  k8sCAFile: /ca.crt
  k8sAPIToken: tok
  k8sInsecureSkipTLSVerify: false
  k8sDisableNodePoll: true
  usePodCIDR: true
  k8sClientQPS: 12.5
  k8sClientBurst: 40
  k8sCurrentContext: prod
  calicoAPIGroup: projectcalico.org/v3
  etcdKey: "-----BEGIN KEY-----"
  etcdCert: "-----BEGIN CERT-----"
  etcdCACert: "-----BEGIN CA-----"
`), 0o644)
	got, err := Load(file, true, envFrom(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{DatastoreType: "kubernetes", Kubeconfig: "/root/.kube/config", KubeconfigInline: "apiVersion: v1\nkind: Config\n",
		K8sAPIEndpoint: "https://10.0.0.1:6443", K8sKeyFile: "/k.key", K8sCertFile: "/k.crt", K8sCAFile: "/ca.crt", K8sAPIToken: "tok",
		K8sDisableNodePoll: true, K8sUsePodCIDR: true, K8sClientQPS: 12.5, K8sClientBurst: 40, K8sCurrentContext: "prod",
		CalicoAPIGroup: "projectcalico.org/v3", EtcdKey: "-----BEGIN KEY-----", EtcdCert: "-----BEGIN CERT-----", EtcdCACert: "-----BEGIN CA-----"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	env := map[string]string{"K8S_CLIENT_QPS": "7", "K8S_CLIENT_BURST": "9", "K8S_CURRENT_CONTEXT": "dev", "CALICO_API_GROUP": "crd.projectcalico.org/v1", "K8S_DISABLE_NODE_POLL": "false", "USE_POD_CIDR": "false"}
	got, err = Load(file, true, envFrom(env))
	if err != nil {
		t.Fatal(err)
	}
	if got.K8sClientQPS != 7 || got.K8sClientBurst != 9 || got.K8sCurrentContext != "dev" || got.CalicoAPIGroup != "crd.projectcalico.org/v1" || got.K8sDisableNodePoll || got.K8sUsePodCIDR {
		t.Fatalf("environment not applied: %+v", got)
	}
	for _, bad := range []map[string]string{{"K8S_CLIENT_QPS": "fast"}, {"K8S_CLIENT_BURST": "1.5"}} {
		if _, err := Load(file, true, envFrom(bad)); err == nil || !strings.Contains(err.Error(), "environment variable K8S_CLIENT_") {
			t.Errorf("%v: error %v, want a refusal naming the variable", bad, err)
		}
	}
}
