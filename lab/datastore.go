package lab

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/lab/internal/harness"
	"github.com/tabbynet/tabby/manifests"
)

// Datastore modes.
const (
	DatastoreEtcd       = "etcd"
	DatastoreKubernetes = "kubernetes"
)

// Dataplane modes (up --dataplane): felix's nftablesMode, set as
// Calico's operator sets it for an Installation's linuxDataplane
// (FELIX_NFTABLESMODE on calico-node). Unset, felix's default (Auto)
// decides: iptables in the lab, where no kube-proxy runs in nftables mode.
const (
	DataplaneIptables = "iptables"
	DataplaneNftables = "nftables"
)

// KubeBinDir is where hack/build-kube-binaries.sh leaves etcd,
// kube-apiserver and kubectl ($TABBY_KUBE_BIN overrides it).
func KubeBinDir() string {
	if d := os.Getenv("TABBY_KUBE_BIN"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "tabby-kube", "bin")
}

// serversPresent checks, before anything starts, that the datastore's
// servers are built, and says exactly what builds them when not.
func serversPresent(datastore string) error {
	need, build := []string{"etcd"}, "hack/build-kube-binaries.sh etcd (~1-2 min cold; make lab does it)"
	if datastore == DatastoreKubernetes {
		need = append(need, "kube-apiserver")
		build = "hack/build-kube-binaries.sh (~8 min or more cold; make lab DATASTORE=kubernetes does it)"
	}
	dir := KubeBinDir()
	var missing []string
	for _, b := range need {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--datastore %s needs %s in %s: from the repository, run %s",
			datastore, strings.Join(missing, " and "), dir, build)
	}
	return nil
}

// startDatastore starts etcd (and with the Kubernetes datastore the
// kube-apiserver on it, with Tabby's CRDs). calico-node initialises it
// (ClusterInformation, tiers, default configurations).
func (l *Lab) startDatastore(ctx context.Context) error {
	if err := l.startEtcd(); err != nil {
		return err
	}
	if l.State.Datastore == DatastoreKubernetes {
		if err := l.startAPIServer(ctx); err != nil {
			return err
		}
	}
	return writeState(l.Dir, l.State)
}

func (l *Lab) startEtcd() error {
	dir := filepath.Join(l.Dir, "etcd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	client, err := harness.FreePort()
	if err != nil {
		return err
	}
	peer, err := harness.FreePort()
	if err != nil {
		return err
	}
	// etcd names the unix socket after the URL's host, in its working
	// folder: reachable from every namespace.
	sock := "localhost:" + strconv.Itoa(client)
	l.State.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(client)
	l.State.EtcdUnix = "unix://" + filepath.Join(dir, sock)
	bin := filepath.Join(KubeBinDir(), "etcd")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no etcd at %s: run hack/build-kube-binaries.sh etcd: %w", bin, err)
	}
	p, err := l.spawnWD(dir, "etcd", "", nil, bin, "--name", "lab", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", l.State.EtcdURL+",unix://"+sock, "--advertise-client-urls", l.State.EtcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peer), "--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peer),
		"--initial-cluster", "lab=http://127.0.0.1:"+strconv.Itoa(peer), "--unsafe-no-fsync", "--log-level", "warn")
	if err != nil {
		return err
	}
	return l.waitHealthy("etcd", p, l.State.EtcdURL+"/health", nil, 30*time.Second)
}

func (l *Lab) waitHealthy(name string, p *os.Process, url string, client *http.Client, timeout time.Duration) error {
	if client == nil {
		client = &http.Client{Timeout: time.Second}
	}
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !harness.Alive(p.Pid) {
			return fmt.Errorf("%s exited while starting:\n%s", name, l.logTail(name))
		}
	}
	return fmt.Errorf("%s not healthy at %s after %s:\n%s", name, url, timeout, l.logTail(name))
}

// startAPIServer runs the real kube-apiserver on the lab's etcd, with an
// admin token, and installs the CRDs.
func (l *Lab) startAPIServer(ctx context.Context) error {
	dir := filepath.Join(l.Dir, "apiserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	port, err := harness.FreePort()
	if err != nil {
		return err
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+",admin,admin-uid,system:masters\n"), 0o600); err != nil {
		return err
	}
	saKey, saPub := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := writeServiceAccountKeys(saKey, saPub); err != nil {
		return err
	}
	bin := filepath.Join(KubeBinDir(), "kube-apiserver")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no kube-apiserver at %s: run hack/build-kube-binaries.sh (make kube-binaries): %w", bin, err)
	}
	l.State.APIServer = fmt.Sprintf("https://127.0.0.1:%d", port)
	p, err := l.spawn("kube-apiserver", "", nil, bin,
		"--etcd-servers="+l.State.EtcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saPub, "--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/24", "--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount", "--endpoint-reconciler-type=none")
	if err != nil {
		return err
	}
	l.State.Kubeconfig = filepath.Join(l.Dir, "kubeconfig")
	if err := os.WriteFile(l.State.Kubeconfig, []byte(kubeconfig(l.State.APIServer, token)), 0o600); err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &bearer{token: token,
		rt: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	if err := l.waitHealthy("kube-apiserver", p, l.State.APIServer+"/readyz", client, 120*time.Second); err != nil {
		return err
	}
	rc, err := l.restConfig()
	if err != nil {
		return err
	}
	return applyCRDs(ctx, rc)
}

func kubeconfig(server, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: tabby-lab
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: tabby-lab
  context: {cluster: tabby-lab, user: admin}
current-context: tabby-lab
`, server, token)
}

type bearer struct {
	token string
	rt    http.RoundTripper
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.rt.RoundTrip(r)
}

func writeServiceAccountKeys(keyPath, pubPath string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// applyCRDs creates Tabby's CRDs and waits until each is Established.
func applyCRDs(ctx context.Context, rc *rest.Config) error {
	cs, err := apiextensions.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	files, err := fs.Glob(manifests.CRDs, "crds/*.yaml")
	if err != nil {
		return err
	}
	var names []string
	for _, f := range files {
		data, err := fs.ReadFile(manifests.CRDs, f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	for _, name := range names {
		for {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("CRD %s: %w", name, err)
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if established {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("CRD %s never became Established: %+v", name, crd.Status.Conditions)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func (l *Lab) restConfig() (*rest.Config, error) {
	return clientcmd.BuildConfigFromFlags("", l.State.Kubeconfig)
}

// client is the lab's Calico datastore client (opened once).
func (l *Lab) client() (datastore.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ds != nil {
		return l.ds, nil
	}
	var err error
	switch l.State.Datastore {
	case DatastoreKubernetes:
		var rc *rest.Config
		if rc, err = l.restConfig(); err == nil {
			l.ds, err = kdd.New(kdd.Config{REST: rc})
		}
	default:
		l.ds, err = etcd.New(etcd.Config{Endpoints: []string{l.State.EtcdURL}})
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to the lab's datastore: %w", err)
	}
	return l.ds, nil
}

// kube is a Kubernetes clientset (Kubernetes datastore only).
func (l *Lab) kube() (kubernetes.Interface, error) {
	if l.State.Kubeconfig == "" {
		return nil, fmt.Errorf("the lab runs on etcd: no Kubernetes API")
	}
	rc, err := l.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// datastoreEnv are Calico's datastore variables pointing at the lab's
// datastore (etcd through its unix socket, reachable from any namespace).
func (l *Lab) datastoreEnv() []string {
	if l.State.Datastore == DatastoreKubernetes {
		return []string{"DATASTORE_TYPE=kubernetes", "KUBECONFIG=" + l.State.Kubeconfig}
	}
	ep := l.State.EtcdUnix
	if ep == "" {
		ep = l.State.EtcdURL
	}
	return []string{"DATASTORE_TYPE=etcdv3", "ETCD_ENDPOINTS=" + ep}
}
