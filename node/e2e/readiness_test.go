//go:build privileged && integration

package e2e

import (
	"context"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/lib/calicolog"
)

// TestPrivilegedNodeReadinessNamesCause: calico-node's /readiness names
// the failing part and its cause. A bpfEnabled FelixConfiguration
// (a security setting Tabby cannot honour) makes it not ready, naming the
// setting, until it is removed; with etcd stopped it names the datastore
// (felix/datastore), not the dataplane. An IPIP pool on this machine's
// kernel (no ipip) makes it not ready naming ipip (felix/routes). Every line calico-node logs is in
// Calico's log line format.
func TestPrivilegedNodeReadinessNamesCause(t *testing.T) {
	c := multinode.New(t, multinode.Options{Nodes: 1, NoNodeResources: true})
	ctx := context.Background()
	fc := &v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v3.FelixConfigurationSpec{BPFEnabled: new(true)}}
	if _, err := c.Client.Create(ctx, fc); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, c, c.Nodes[0], "CALICO_NETWORKING_BACKEND=vxlan", "CALICO_IPV4POOL_CIDR=10.83.0.0/16",
		"CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=Always", "FELIX_PROMETHEUSMETRICSENABLED=true")
	a.readyFlags = []string{"-felix-ready"}
	a.start()
	eventually(t, 60*time.Second, "not ready naming bpfEnabled", func() (bool, string) {
		code, body := a.http("/readiness")
		return code == 503 && strings.Contains(body,
			"felix/settings: FAIL (BPFEnabled=true (FelixConfiguration default) cannot be honoured: the eBPF dataplane is not implemented"), body
	})
	if out, code := a.probe(a.readyFlags...); code == 0 {
		t.Errorf("calico-node -felix-ready passes with bpfEnabled refused: %s", out)
	}
	if !strings.Contains(a.metrics(), "tabby_felix_security_settings_unhonoured 1") {
		t.Error("tabby_felix_security_settings_unhonoured is not 1")
	}

	cur, err := c.Client.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	cur.(*v3.FelixConfiguration).Spec.BPFEnabled = nil
	if _, err := c.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	a.waitReady(60 * time.Second)

	// An IPIP pool on this machine's kernel (no ipip module): tunl0
	// cannot be created, so routes fail and the node is not ready,
	// naming it; without the pool it is ready again.
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: "ipip"},
		Spec: v3.IPPoolSpec{CIDR: "10.84.0.0/16", BlockSize: 26, IPIPMode: v3.IPIPModeAlways, VXLANMode: v3.VXLANModeNever, NodeSelector: "all()"}}
	if _, err := c.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "not ready naming ipip", func() (bool, string) {
		code, body := a.http("/readiness")
		return code == 503 && regexp.MustCompile(`felix/routes: FAIL \(route sync failing for \d+s: .*tunl0.*ipip`).MatchString(body), body
	})
	if _, err := c.Client.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "ipip"}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitReady(60 * time.Second)

	c.Etcd.Stop()
	var body string
	eventually(t, 60*time.Second, "not ready naming the datastore", func() (bool, string) {
		var code int
		code, body = a.http("/readiness")
		return code == 503 && strings.Contains(body, "felix/datastore: FAIL (unreachable: "), body
	})
	if strings.Contains(body, "felix/dataplane: FAIL") {
		t.Errorf("readiness blames the dataplane with etcd stopped:\n%s", body)
	}
	a.stop(syscall.SIGKILL) // etcd is gone: no clean stop to wait for
	for _, l := range strings.Split(strings.TrimSuffix(a.log.String(), "\n"), "\n") {
		if !calicolog.LinePattern().MatchString(l) {
			t.Errorf("not Calico's log line format: %q", l)
		}
	}
}
