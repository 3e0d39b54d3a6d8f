//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestIntegrationBinary drives the built calico-ipam binary as a runtime
// would (environment + stdin) against a real etcd: ADD, repeated ADD, CHECK,
// GC, DEL twice, STATUS, and the error codes of bad input and a stopped
// datastore. It also prints ADD/DEL latency of the process.
func TestIntegrationBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "calico-ipam")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	server := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{server.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(context.Background(), &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v3.IPPoolSpec{CIDR: "10.0.0.0/24"}}); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(t.TempDir(), "ipam.lock")
	conf := func(extra string) string {
		return fmt.Sprintf(`{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"calico","datastore_type":"etcdv3",
			"etcd_endpoints":%q,"nodename":"node-1","ipam_lock_file":%q,"ipam":{"type":"calico-ipam"}%s}`, server.Endpoint(), lock, extra)
	}
	run := func(cmd, cid, stdin, cniArgs string) (map[string]any, error) {
		t.Helper()
		p := exec.Command(bin)
		p.Env = append(os.Environ(), "CNI_COMMAND="+cmd, "CNI_CONTAINERID="+cid, "CNI_NETNS=/var/run/netns/x",
			"CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "CNI_ARGS="+cniArgs)
		p.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		p.Stdout = &out
		err := p.Run()
		var m map[string]any
		if out.Len() > 0 {
			if jerr := json.Unmarshal(out.Bytes(), &m); jerr != nil {
				t.Fatalf("%s output %q: %v", cmd, out.String(), jerr)
			}
		}
		return m, err
	}
	k8s := "K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-a"
	res, err := run("ADD", "ctr-a", conf(""), k8s)
	if err != nil {
		t.Fatalf("ADD: %v %v", err, res)
	}
	ips := res["ips"].([]any)
	addr := ips[0].(map[string]any)["address"].(string)
	if !strings.HasPrefix(addr, "10.0.0.") || !strings.HasSuffix(addr, "/32") || len(res["routes"].([]any)) != 1 {
		t.Fatalf("ADD result %v", res)
	}
	if res2, err := run("ADD", "ctr-a", conf(""), k8s); err != nil || res2["ips"].([]any)[0].(map[string]any)["address"] != addr {
		t.Fatalf("repeated ADD: %v %v", res2, err)
	}
	prev := fmt.Sprintf(`,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":%q}]}`, addr)
	if out, err := run("CHECK", "ctr-a", conf(prev), k8s); err != nil {
		t.Fatalf("CHECK: %v %v", err, out)
	}
	if _, err := run("ADD", "ctr-b", conf(""), "K8S_POD_NAMESPACE=default;K8S_POD_NAME=pod-b"); err != nil {
		t.Fatal(err)
	}
	gc := `,"cni.dev/valid-attachments":[{"containerID":"ctr-a","ifname":"eth0"}]`
	if out, err := run("GC", "", conf(gc), ""); err != nil {
		t.Fatalf("GC: %v %v", err, out)
	}
	if out, err := run("CHECK", "ctr-b", conf(""), ""); err == nil {
		t.Fatalf("ctr-b survived GC: %v", out)
	}
	if out, err := run("CHECK", "ctr-a", conf(prev), k8s); err != nil {
		t.Fatalf("ctr-a lost by GC: %v %v", err, out)
	}
	for range 2 {
		if out, err := run("DEL", "ctr-a", conf(""), k8s); err != nil {
			t.Fatalf("DEL: %v %v", err, out)
		}
	}
	if out, err := run("STATUS", "", conf(""), ""); err != nil {
		t.Fatalf("STATUS: %v %v", err, out)
	}
	// Bad input, each with its code.
	for _, tc := range []struct {
		name, stdin, args string
		code              float64
	}{
		{"malformed JSON", `{`, "", 6},
		{"bad assign_ipv4", strings.Replace(conf(""), `"calico-ipam"`, `"calico-ipam","assign_ipv4":"maybe"`, 1), "", 7},
		{"unknown pool", strings.Replace(conf(""), `"calico-ipam"`, `"calico-ipam","ipv4_pools":["nope"]`, 1), "", 101},
		{"address outside pools", conf(""), "IP=192.168.9.9", 102},
		{"bad IP arg", conf(""), "IP=10.0.0.999", 4},
	} {
		out, err := run("ADD", "bad", tc.stdin, tc.args)
		if err == nil || out["code"] != tc.code {
			t.Errorf("%s: code %v (want %v): %v", tc.name, out["code"], tc.code, out)
		}
	}
	// Latency of the process, ADD and DEL.
	var adds, dels []time.Duration
	for i := range 30 {
		t0 := time.Now()
		if _, err := run("ADD", fmt.Sprint("lat", i), conf(""), ""); err != nil {
			t.Fatal(err)
		}
		adds = append(adds, time.Since(t0))
	}
	for i := range 30 {
		t0 := time.Now()
		if _, err := run("DEL", fmt.Sprint("lat", i), conf(""), ""); err != nil {
			t.Fatal(err)
		}
		dels = append(dels, time.Since(t0))
	}
	p50 := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	t.Logf("calico-ipam process: ADD p50 %v, DEL p50 %v (30 each, etcd)", p50(adds), p50(dels))
	// Datastore down: try again later.
	server.Stop()
	if out, err := run("ADD", "down", conf(""), ""); err == nil || out["code"] != float64(11) {
		t.Fatalf("datastore down: %v %v", out, err)
	}
	if out, err := run("STATUS", "", conf(""), ""); err == nil || out["code"] != float64(50) {
		t.Fatalf("STATUS down: %v %v", out, err)
	}
}

// TestIntegrationBinaryNamespaceSelector: with a kubeconfig (Calico's
// condition: a kubeconfig or policy type k8s), calico-ipam reads the pod's
// namespace from a real kube-apiserver and matches pools'
// namespaceSelectors with its labels, as Calico's calico-ipam does; a
// namespace no pool selects is refused (101, naming the pools), never
// given another pool's address.
func TestIntegrationBinaryNamespaceSelector(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "calico-ipam")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	server := testservers.StartEtcd(t)
	k := testservers.StartKubeAPIServer(t, testservers.WithAPIServerFlags("--shutdown-watch-termination-grace-period=1s"))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, n := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{"ns": "w"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "u"}},
	} {
		if _, err := kubernetes.NewForConfigOrDie(rc).CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := etcd.New(etcd.Config{Endpoints: []string{server.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "pool-w"}, Spec: v3.IPPoolSpec{CIDR: "10.0.1.0/24", NamespaceSelector: "ns == 'w'", AllowedUses: []v3.IPPoolAllowedUse{v3.IPPoolAllowedUseWorkload}}}); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"calico","datastore_type":"etcdv3",
		"etcd_endpoints":%q,"nodename":"node-1","ipam_lock_file":"","kubernetes":{"kubeconfig":%q},"ipam":{"type":"calico-ipam"}}`, server.Endpoint(), k.Kubeconfig())
	run := func(cid, namespace string) (map[string]any, error) {
		p := exec.Command(bin)
		p.Env = append(os.Environ(), "CNI_COMMAND=ADD", "CNI_CONTAINERID="+cid, "CNI_NETNS=/var/run/netns/x",
			"CNI_IFNAME=eth0", "CNI_PATH=/opt/cni/bin", "CNI_ARGS=K8S_POD_NAMESPACE="+namespace+";K8S_POD_NAME="+cid)
		p.Stdin = strings.NewReader(conf)
		var out bytes.Buffer
		p.Stdout = &out
		err := p.Run()
		var m map[string]any
		if jerr := json.Unmarshal(out.Bytes(), &m); jerr != nil {
			t.Fatalf("output %q: %v", out.String(), jerr)
		}
		return m, err
	}
	res, err := run("in-w", "w")
	if err != nil {
		t.Fatalf("ADD in w: %v %v", err, res)
	}
	if addr := res["ips"].([]any)[0].(map[string]any)["address"].(string); !strings.HasPrefix(addr, "10.0.1.") {
		t.Errorf("ADD in w got %s, want an address of pool-w", addr)
	}
	out, err := run("in-u", "u")
	if msg, _ := out["msg"].(string); err == nil || out["code"] != float64(101) || !strings.Contains(msg, `namespaceSelector "ns == 'w'", which does not select namespace "u"`) {
		t.Errorf("ADD in u: code %v %v, want 101 naming pool-w's namespaceSelector", out["code"], out)
	}
	if out, err := run("in-gone", "gone"); err == nil || !strings.Contains(fmt.Sprint(out), `failed to get namespace gone`) {
		t.Errorf("ADD in a namespace Kubernetes does not have: %v %v", out, err)
	}
}
