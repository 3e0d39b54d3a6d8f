package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cluster network settings, Kubernetes's usual ones.
const (
	serviceCIDR = "10.96.0.0/12"
	serviceIP   = "10.96.0.1" // the kubernetes Service's
	podCIDR     = "192.168.0.0/16"
)

// tokens are the static bearer tokens of the cluster's users (kube-apiserver
// --token-auth-file): the admin (also kube-controller-manager's and
// kube-scheduler's), kube-proxy, and one per kubelet (user
// system:node:<name>, for the Node authorizer).
type tokens struct {
	Admin, Proxy string
	Nodes        map[string]string
}

func newTokens(nodes []string) tokens {
	t := tokens{Admin: "admin-" + randHex(16), Proxy: "proxy-" + randHex(16), Nodes: map[string]string{}}
	for _, n := range nodes {
		t.Nodes[n] = "node-" + randHex(16)
	}
	return t
}

// csv is the --token-auth-file.
func (t tokens) csv() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s,admin,admin,system:masters\n", t.Admin)
	fmt.Fprintf(&b, "%s,system:kube-proxy,kube-proxy\n", t.Proxy)
	for n, tok := range t.Nodes {
		fmt.Fprintf(&b, "%s,system:node:%s,node-%s,system:nodes\n", tok, n, n)
	}
	return b.String()
}

// kubeconfig is a kubeconfig for server with the cluster's CA and token.
func kubeconfig(server, caFile, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: tabby
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    token: %s
contexts:
- name: tabby
  context: {cluster: tabby, user: user}
current-context: tabby
`, server, caFile, token)
}

// inCP prefixes argv to run in the control plane's network namespace.
func (c *Cluster) inCP(argv ...string) []string {
	return append([]string{"nsenter", "--net=" + netnsPath(c.cpNetns()), "--"}, argv...)
}

func (c *Cluster) cpNetns() string { return c.State.Prefix + "-cp" }

// startEtcd starts etcd in the control plane's namespace, on its loopback
// and underlay address (the etcd datastore's nodes reach it there).
func (c *Cluster) startEtcd() error {
	dir := filepath.Join(c.Dir, "etcd")
	cu := fmt.Sprintf("http://127.0.0.1:%d,http://%s:%d", etcdPort, cpAddr, etcdPort)
	_, err := c.spawn("etcd", c.inCP(filepath.Join(c.KubeBin, "etcd"), "--name", "cp", "--data-dir", dir,
		"--listen-client-urls", cu, "--advertise-client-urls", fmt.Sprintf("http://%s:%d", cpAddr, etcdPort),
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "cp=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level", "warn")...)
	return err
}

// startAPIServer starts kube-apiserver in the control plane's namespace.
func (c *Cluster) startAPIServer(p *pki, tok tokens) error {
	cert, key, err := p.serving("apiserver", []net.IP{net.ParseIP(serviceIP), net.ParseIP(cpAddr), net.ParseIP("127.0.0.1")},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"})
	if err != nil {
		return err
	}
	saKey, saPub, err := p.serviceAccountKeys()
	if err != nil {
		return err
	}
	tf := filepath.Join(p.dir, "tokens.csv")
	if err := os.WriteFile(tf, []byte(tok.csv()), 0o600); err != nil {
		return err
	}
	_, err = c.spawn("kube-apiserver", c.inCP(filepath.Join(c.KubeBin, "kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort), "--bind-address=0.0.0.0",
		"--advertise-address="+cpAddr, "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+cert, "--tls-private-key-file="+key, "--client-ca-file="+p.CAFile,
		"--token-auth-file="+tf, "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range="+serviceCIDR, "--allow-privileged=true",
		"--kubelet-preferred-address-types=InternalIP", "--profiling=false")...)
	return err
}

// startControllers starts kube-controller-manager and kube-scheduler in
// the control plane's namespace, as the admin.
func (c *Cluster) startControllers(p *pki) error {
	kc := filepath.Join(c.Dir, "cp.kubeconfig")
	if _, err := c.spawn("kube-controller-manager", c.inCP(filepath.Join(c.KubeBin, "kube-controller-manager"),
		"--kubeconfig="+kc, "--root-ca-file="+p.CAFile, "--leader-elect=false", "--bind-address=127.0.0.1",
		"--service-cluster-ip-range="+serviceCIDR, "--use-service-account-credentials=false",
		"--cluster-name=tabby", "--node-monitor-grace-period=20s")...); err != nil {
		return err
	}
	_, err := c.spawn("kube-scheduler", c.inCP(filepath.Join(c.KubeBin, "kube-scheduler"),
		"--kubeconfig="+kc, "--leader-elect=false", "--bind-address=127.0.0.1")...)
	return err
}

// waitAPI waits until the API server answers /readyz through the
// forwarder.
func (c *Cluster) waitAPI(ctx context.Context, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.State.APIServer+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kube-apiserver not ready after %s: %w\n%s", timeout, err, c.logTail("kube-apiserver"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
