package plugin

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/plugins/pkg/ns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

// fuzzStall bounds one call: the plugin's own timeout is set far lower,
// so a call still running by then is stuck.
const fuzzStall = 20 * time.Second

// FuzzPluginInput feeds random bytes as the network configuration (stdin)
// and CNI_ARGS, with any command and interface name, to the plugin's
// entry points over an in-memory datastore holding a pool (issue 19,
// "Done when"): every call must return, with an error or a result, and
// never panic. The node's namespace is withheld, so nothing on the host
// is ever touched; CNI_NETNS names no namespace.
func FuzzPluginInput(f *testing.F) {
	base := `{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"calico","nodename":"node1","etcd_endpoints":"http://127.0.0.1:1","ipam":{"type":"calico-ipam"}`
	for _, seed := range []struct {
		conf, args, ifName string
		cmd                uint8
	}{
		{base + `}`, "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web", "eth0", 0},
		{base + `}`, "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web", "net1", 1},
		{base + `,"prevResult":{"cniVersion":"1.1.0","ips":[{"address":"10.0.0.1/32"}]}}`, "IgnoreUnknown=1", "eth0", 2},
		{base + `,"prevResult":{"ips":[]}}`, "", "eth0", 2},
		{base + `,"prevResult":"garbage"}`, "K8S_POD_NAMESPACE=Default;K8S_POD_NAME=a/b", "eth0", 1},
		{base + `,"cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}`, "", "eth0", 3},
		{base + `}`, "", "", 4},
		{`{"name":"x",`, "no-equals-sign", "eth0", 0},
		{base + `,"ipam":{"type":"calico-ipam","assign_ipv4":"maybe"}}`, "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;IP=10.0.0.9", "eth0", 0},
	} {
		f.Add([]byte(seed.conf), seed.args, seed.ifName, seed.cmd)
	}
	f.Fuzz(func(t *testing.T, stdin []byte, cniArgs, ifName string, cmd uint8) {
		store := ipamtest.NewStore()
		if _, err := store.Create(context.Background(), &v3.IPPool{
			TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: "pool"},
			Spec: v3.IPPoolSpec{CIDR: "10.0.0.0/24", BlockSize: 28},
		}); err != nil {
			t.Fatal(err)
		}
		p := &Plugin{
			Hostname:  func() (string, error) { return "fuzz-node", nil },
			NewClient: func(*netconf.NetConf) (datastore.Client, error) { return store, nil },
			HostNS:    func() (ns.NetNS, error) { return nil, errors.New("no node namespace in the fuzz test") },
			Timeout:   2 * time.Second,
			HintDir:   t.TempDir(),
		}
		a := &skel.CmdArgs{ContainerID: "fuzz-cid", Netns: "/nonexistent/netns", IfName: ifName, Args: cniArgs, StdinData: stdin}
		calls := []func(*skel.CmdArgs) error{p.Add, p.Del, p.Check, p.GC, p.Status}
		call := calls[int(cmd)%len(calls)]
		done := make(chan any, 1)
		go func() {
			defer func() { done <- recover() }()
			_ = call(a)
		}()
		select {
		case r := <-done:
			if r != nil {
				panic(fmt.Sprintf("command %d panicked: %v", int(cmd)%len(calls), r))
			}
		case <-time.After(fuzzStall):
			t.Fatalf("command %d stalled on stdin %q, CNI_ARGS %q", int(cmd)%len(calls), stdin, cniArgs)
		}
	})
}
