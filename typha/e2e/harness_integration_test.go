//go:build integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// typhaBin is the typha command, built once by TestMain.
var typhaBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "typha-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	typhaBin = filepath.Join(dir, "typha")
	out, err := exec.Command("go", "build", "-o", typhaBin, "github.com/tabbynet/tabby/typha/cmd/typha").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building typha: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is a real kube-apiserver with Calico's CRDs.
type cluster struct {
	*testservers.KubeAPIServer
	rest *rest.Config
	kube kubernetes.Interface
	ds   *kdd.Client

	published int      // Typhas published behind the Service
	names     sync.Map // their endpoint names (host:port) -> loopback address
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1
	testservers.ApplyCRDs(t, rc, "../../manifests/crds")
	c := &cluster{KubeAPIServer: k, rest: rc, kube: kubernetes.NewForConfigOrDie(rc)}
	c.ds = c.client(t)
	return c
}

// client is a new datastore client (a node's own).
func (c *cluster) client(t testing.TB) *kdd.Client {
	t.Helper()
	ds, err := kdd.New(kdd.Config{REST: rest.CopyConfig(c.rest), QPS: -1, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ds.Close() })
	return ds
}

// addNodes creates Kubernetes Nodes with Calico's address annotation.
func (c *cluster) addNodes(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i),
			Annotations: map[string]string{"projectcalico.org/IPv4Address": fmt.Sprintf("10.%d.%d.1/16", i/250, i%250)}}}
		if _, err := c.kube.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// addHostEndpoints gives each of the first n nodes a host endpoint on
// eth0, so that felix renders the policies for it.
func (c *cluster) addHostEndpoints(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		hep := &v3.HostEndpoint{TypeMeta: metav1.TypeMeta{Kind: v3.KindHostEndpoint, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "hep-" + nodeName(i), Labels: map[string]string{"role": "node"}},
			Spec:       v3.HostEndpointSpec{Node: nodeName(i), InterfaceName: "eth0"}}
		hep.Default()
		if _, err := c.ds.Create(context.Background(), hep); err != nil {
			t.Fatal(err)
		}
	}
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// addPolicies creates n GlobalNetworkPolicies gnp-<i>.
func (c *cluster) addPolicies(t testing.TB, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.ds.Create(context.Background(), policy(fmt.Sprintf("gnp-%d", i), float64(i))); err != nil {
			t.Fatal(err)
		}
	}
}

func policy(name string, order float64) *v3.GlobalNetworkPolicy {
	p := &v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Order = &order
	p.Spec.Selector = "all()"
	tcp := numorstring.ProtocolFromString("TCP")
	p.Spec.Ingress = []v3.Rule{{Action: v3.Allow, Protocol: &tcp}}
	p.Default()
	return p
}

// typha is one Typha process.
type typha struct {
	*testservers.Command
	addr        string
	metricsPort int
	healthPort  int
}

// startTypha starts the typha command on the cluster and waits until it
// is ready (in sync with the datastore).
func startTypha(t testing.TB, c *cluster, name string, extraEnv ...string) *typha {
	t.Helper()
	ty := &typha{metricsPort: freePort(t), healthPort: freePort(t)}
	port := freePort(t)
	ty.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	env := append(os.Environ(), "TYPHA_DATASTORETYPE=kubernetes", "KUBECONFIG="+c.Kubeconfig(),
		"TYPHA_SERVERHOST=127.0.0.1", "TYPHA_SERVERPORT="+strconv.Itoa(port),
		"TYPHA_HEALTHENABLED=true", "TYPHA_HEALTHHOST=127.0.0.1", "TYPHA_HEALTHPORT="+strconv.Itoa(ty.healthPort),
		"TYPHA_PROMETHEUSMETRICSENABLED=true", "TYPHA_PROMETHEUSMETRICSHOST=127.0.0.1",
		"TYPHA_PROMETHEUSMETRICSPORT="+strconv.Itoa(ty.metricsPort), "TYPHA_LOGSEVERITYSCREEN=Warning")
	env = append(env, extraEnv...)
	ty.Command = testservers.StartCommand(t, name, []string{typhaBin}, env)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readiness", ty.healthPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return ty
			}
		}
		if time.Now().After(deadline) || !ty.Running() {
			t.Fatalf("typha %s not ready: %v\n%s", name, err, ty.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metric sums a metric's samples on a Prometheus text endpoint.
func metric(t testing.TB, url, name string) float64 {
	t.Helper()
	v, err := scrape(url, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// scrape sums a metric's samples on a Prometheus text endpoint.
func scrape(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return sumMetric(string(body), name, ""), err
}

// sumMetric sums the samples of name whose labels contain match.
func sumMetric(text, name, match string) float64 {
	var sum float64
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		if match != "" && !strings.Contains(l, match) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

func (ty *typha) metric(t testing.TB, name string) float64 {
	return metric(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", ty.metricsPort), name)
}

// publish makes Service kube-system/calico-typha if it is not there yet
// and adds the Typhas to its endpoints, one EndpointSlice of type FQDN
// each, and returns the dialer that takes their names to the Typhas'
// loopback addresses (the API server refuses loopback addresses in
// EndpointSlices).
func (c *cluster) publish(t testing.TB, typhas ...*typha) func(context.Context, string, string) (net.Conn, error) {
	t.Helper()
	ctx := context.Background()
	if c.published == 0 {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "calico-typha", Namespace: "kube-system"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "calico-typha", Port: 5473}}}}
		if _, err := c.kube.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ty := range typhas {
		i := c.published
		c.published++
		host := fmt.Sprintf("typha-%d.kube-system.test", i)
		c.names.Store(net.JoinHostPort(host, "5473"), ty.addr)
		port32, name, ready := int32(5473), "calico-typha", true
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("calico-typha-%d", i), Namespace: "kube-system",
			Labels: map[string]string{discoveryv1.LabelServiceName: "calico-typha"}},
			AddressType: discoveryv1.AddressTypeFQDN,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port32}}}
		if _, err := c.kube.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, es, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := c.names.Load(addr)
		if !ok {
			return nil, fmt.Errorf("test dialer: unknown Typha %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, to.(string))
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func waitUntil(t testing.TB, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}
