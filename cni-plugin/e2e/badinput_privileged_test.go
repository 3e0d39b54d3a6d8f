//go:build privileged

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// execPlugin runs the calico binary the way a runtime does, inside the
// node namespace, and returns its CNI error (code 0 when it succeeded).
func (c *cluster) execPlugin(t *testing.T, command, stdin string, env map[string]string) (uint, string) {
	t.Helper()
	base := map[string]string{
		"CNI_COMMAND": command, "CNI_CONTAINERID": "cid-bad-input", "CNI_IFNAME": "eth0",
		"CNI_PATH": cniBinDir(t), "CNI_ARGS": "K8S_POD_NAMESPACE=default;K8S_POD_NAME=bad",
		"TABBY_CNI_HINT_DIR": os.Getenv("TABBY_CNI_HINT_DIR"),
	}
	for k, v := range env {
		base[k] = v
	}
	var out, errOut bytes.Buffer
	var runErr error
	c.inNode(func() error {
		cmd := exec.Command(filepath.Join(cniBinDir(t), "calico"))
		for k, v := range base {
			if v != "-" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		runErr = cmd.Run()
		return nil
	})
	var e struct {
		Code    uint   `json:"code"`
		Msg     string `json:"msg"`
		Details string `json:"details"`
	}
	if out.Len() == 0 && runErr == nil {
		return 0, "" // DEL and CHECK print nothing on success
	}
	if err := json.Unmarshal(out.Bytes(), &e); err != nil {
		t.Fatalf("plugin output is not JSON: %q (stderr %q, exit %v)", out.String(), errOut.String(), runErr)
	}
	return e.Code, e.Msg + ": " + e.Details
}

// TestPrivilegedBadInput: every bad input gets its CNI error code and a
// message that says what is wrong, and nothing is left behind.
func TestPrivilegedBadInput(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.247.0.0/16"}})
	ctx := context.Background()
	// A tiny pool (one /30 block) and a disabled one for the IPAM cases.
	for _, p := range []*v3.IPPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "tiny"}, Spec: v3.IPPoolSpec{CIDR: "10.248.0.0/30", BlockSize: 30}},
		{ObjectMeta: metav1.ObjectMeta{Name: "off"}, Spec: v3.IPPoolSpec{CIDR: "10.249.0.0/24", Disabled: true}},
	} {
		p.Kind = v3.KindIPPool
		if _, err := c.client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	good := func(extra string) string {
		return `{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"calico","nodename":"node1","etcd_endpoints":"` +
			c.etcd.UnixEndpoint() + `"` + extra + `}`
	}
	ipam := `,"ipam":{"type":"calico-ipam"}`
	podNS := c.newPod("bad").netns.Path()

	cases := []struct {
		name string
		conf string
		env  map[string]string
		code uint
		msg  string
	}{
		{"malformed JSON", `{"name": "x", `, nil, 6, "error unmarshall network config"},
		{"missing name", `{"cniVersion":"1.0.0","type":"calico","etcd_endpoints":"http://127.0.0.1:1"` + ipam + `}`, nil, 7, "missing network name"},
		{"unknown datastore", good(ipam + `,"datastore_type":"consul"`), nil, 7, `datastore_type: "consul" is not supported`},
		{"kubernetes without kubeconfig", `{"cniVersion":"1.0.0","name":"n","type":"calico","datastore_type":"kubernetes"` + ipam + `}`, nil, 7, "kubernetes.kubeconfig: is required"},
		{"bad MTU", good(ipam + `,"mtu":70000`), nil, 7, "mtu: 70000 is outside 576-65535"},
		{"MTU not a number", good(ipam + `,"mtu":"jumbo"`), nil, 6, "not valid JSON"},
		{"etcd endpoint not a URL", `{"cniVersion":"1.0.0","name":"n","type":"calico","etcd_endpoints":"10.0.0.1:2379"` + ipam + `}`, nil, 7, "is not an http://, https://, unix:// or unixs:// URL"},
		{"no IPAM", good(""), nil, 7, "ipam.type: is required"},
		{"no address family", good(`,"ipam":{"type":"calico-ipam","assign_ipv4":"false"}`), map[string]string{"CNI_NETNS": podNS}, 7, "both assign_ipv4 and assign_ipv6 are off"},
		{"bad log level", good(ipam + `,"log_level":"loud"`), nil, 7, `log_level: "loud"`},
		{"unsupported CNI version", strings.Replace(good(ipam), `"1.0.0"`, `"0.2.0"`, 1), map[string]string{"CNI_NETNS": podNS}, 1, "incompatible CNI versions"},
		{"missing container ID", good(ipam), map[string]string{"CNI_CONTAINERID": "-", "CNI_NETNS": podNS}, 4, "CNI_CONTAINERID"},
		{"non-existent netns", good(ipam), map[string]string{"CNI_NETNS": "/var/run/netns/tabby-no-such-ns"}, 4, "CNI_NETNS is not a usable network namespace"},
		{"garbage CNI_ARGS", good(ipam), map[string]string{"CNI_NETNS": podNS, "CNI_ARGS": "no-equals-sign"}, 4, "CNI_ARGS"},
		{"required nodename file missing", strings.Replace(good(ipam), `"nodename":"node1",`, `"nodename_file":"/nonexistent/nodename",`, 1), map[string]string{"CNI_NETNS": podNS}, 4, "nodename_file: reading /nonexistent/nodename"},
		{"unknown pool", good(`,"ipam":{"type":"calico-ipam","ipv4_pools":["nope"]}`), map[string]string{"CNI_NETNS": podNS}, 101, "unknown IP pool"},
		{"disabled pool", good(`,"ipam":{"type":"calico-ipam","ipv4_pools":["off"]}`), map[string]string{"CNI_NETNS": podNS}, 101, "disabled"},
		{"datastore unreachable", `{"cniVersion":"1.0.0","name":"n","type":"calico","nodename":"node1","etcd_endpoints":"unix:///nonexistent/etcd.sock"` + ipam + `}`, map[string]string{"CNI_NETNS": podNS}, 11, "datastore unavailable"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"CNI_NETNS": "/var/run/netns/unused"}
			for k, v := range tc.env {
				env[k] = v
			}
			code, msg := c.execPlugin(t, "ADD", tc.conf, env)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got code %d %q, want code %d containing %q", code, msg, tc.code, tc.msg)
			}
			if left := c.leftovers(); len(left) > 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}

	// Exhaust the tiny pool: its 4 addresses go to 4 pods, the fifth fails
	// with the exhausted code naming the pool, and nothing leaks.
	t.Run("exhausted pool", func(t *testing.T) {
		conf := good(`,"ipam":{"type":"calico-ipam","ipv4_pools":["tiny"]}`)
		for i := 0; i < 4; i++ {
			p := c.newPod("tiny-" + string(rune('a'+i)))
			code, msg := c.execPlugin(t, "ADD", conf, map[string]string{"CNI_NETNS": p.netns.Path(), "CNI_CONTAINERID": "tiny-" + string(rune('a'+i)), "CNI_ARGS": "K8S_POD_NAMESPACE=default;K8S_POD_NAME=tiny-" + string(rune('a'+i))})
			if code != 0 {
				t.Fatalf("pod %d: code %d %s", i, code, msg)
			}
		}
		before := len(c.leftovers())
		p := c.newPod("tiny-e")
		code, msg := c.execPlugin(t, "ADD", conf, map[string]string{"CNI_NETNS": p.netns.Path(), "CNI_CONTAINERID": "tiny-e", "CNI_ARGS": "K8S_POD_NAMESPACE=default;K8S_POD_NAME=tiny-e"})
		if code != 100 || !strings.Contains(msg, "exhausted") || !strings.Contains(msg, "node1") {
			t.Fatalf("fifth pod: code %d %q, want 100 naming the pool and node", code, msg)
		}
		if after := len(c.leftovers()); after != before {
			t.Fatalf("the failed ADD changed the node or datastore: %d -> %d things", before, after)
		}
		for i := 0; i < 4; i++ {
			id := "tiny-" + string(rune('a'+i))
			if code, msg := c.execPlugin(t, "DEL", conf, map[string]string{"CNI_NETNS": "", "CNI_CONTAINERID": id, "CNI_ARGS": "K8S_POD_NAMESPACE=default;K8S_POD_NAME=" + id}); code != 0 {
				t.Fatalf("DEL %s: %d %s", id, code, msg)
			}
		}
		if left := c.leftovers(); len(left) > 0 {
			t.Fatalf("left behind: %v", left)
		}
	})
	_ = datastore.ErrNotFound
}

// TestPrivilegedWiringFailureRollsBack: when addressing the pod fails after
// IPAM and the endpoint record succeeded (IPv6 is disabled inside a
// dual-stack pod), the ADD fails with the wiring code and leaves no
// address, endpoint, veth or route behind.
func TestPrivilegedWiringFailureRollsBack(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.254.0.0/16", "fd00:254::/64"}, assignIPv6: true})
	p := c.newPod("no-v6")
	if err := p.netns.Do(func(ns.NetNS) error {
		return os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	err := c.add(p)
	if code, msg := cniCode(err); code != 103 || !strings.Contains(msg, "fd00:254:") {
		t.Fatalf("ADD into a pod without IPv6: code %d %q, want 103 naming the IPv6 address", code, msg)
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("the failed ADD left behind: %v", left)
	}
}
