package testservers

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const adminToken = "tabby-test-admin-token"

// KubeAPIServer is a real kube-apiserver (with its own etcd) on loopback,
// authenticated by a static admin token, authorising with RBAC.
type KubeAPIServer struct {
	Etcd       *Etcd
	proc       *process
	url        string
	kubeconfig string
}

// KubeOption changes how StartKubeAPIServer starts the server.
type KubeOption func(*kubeOptions)

type kubeOptions struct{ flags []string }

// WithAPIServerFlags adds kube-apiserver flags, e.g. "--watch-cache=false"
// (so that a watch from a compacted revision really gets 410 Gone) or
// "--disable-admission-plugins=NamespaceLifecycle". List flags given again
// add to the defaults.
func WithAPIServerFlags(flags ...string) KubeOption {
	return func(o *kubeOptions) { o.flags = append(o.flags, flags...) }
}

// StartKubeAPIServer starts etcd and kube-apiserver and stops both at
// cleanup. The first start takes a few seconds.
func StartKubeAPIServer(t testing.TB, opts ...KubeOption) *KubeAPIServer {
	t.Helper()
	var o kubeOptions
	for _, opt := range opts {
		opt(&o)
	}
	etcd := StartEtcd(t)
	dir := t.TempDir()
	port := freePort(t)
	k := &KubeAPIServer{Etcd: etcd, url: fmt.Sprintf("https://127.0.0.1:%d", port)}

	tokens := filepath.Join(dir, "tokens.csv")
	mustWrite(t, tokens, adminToken+",admin,admin-uid,system:masters\n")
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	writeServiceAccountKeys(t, saKey, saPub)

	k.proc = &process{t: t, name: "kube-apiserver", log: filepath.Join(dir, "apiserver.log"), args: []string{
		binary(t, "kube-apiserver"),
		"--etcd-servers=" + etcd.Endpoint(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount",
		// Required on 127.0.0.1: the default reconciler rejects loopback.
		"--endpoint-reconciler-type=none",
	}}
	k.proc.args = append(k.proc.args, o.flags...)
	t.Cleanup(k.proc.stop)
	k.Start()

	k.kubeconfig = filepath.Join(dir, "kubeconfig")
	mustWrite(t, k.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, k.url, adminToken))
	return k
}

// URL is the API server's address.
func (k *KubeAPIServer) URL() string { return k.url }

// Kubeconfig is the path of an admin kubeconfig for this server.
func (k *KubeAPIServer) Kubeconfig() string { return k.kubeconfig }

// Pid is the API server's process id (0 when stopped).
func (k *KubeAPIServer) Pid() int {
	if k.proc.cmd == nil {
		return 0
	}
	return k.proc.cmd.Process.Pid
}

// Stop stops the API server (its etcd keeps running).
func (k *KubeAPIServer) Stop() { k.proc.stop() }

// Start (re)starts the API server and waits for /readyz.
func (k *KubeAPIServer) Start() {
	k.proc.t.Helper()
	k.proc.start()
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &bearer{rt: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
	}
	waitHealthy(k.proc, k.url+"/readyz", client, 120*time.Second)
}

type bearer struct{ rt http.RoundTripper }

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+adminToken)
	return b.rt.RoundTrip(r)
}

func writeServiceAccountKeys(t testing.TB, keyPath, pubPath string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))
	mustWrite(t, pubPath, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
}

func mustWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
