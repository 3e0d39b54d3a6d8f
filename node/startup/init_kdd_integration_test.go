//go:build integration

package startup

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/datastore/kdd/clientset"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/node/registration"
)

// TestIntegrationInitDatastoreKubernetes: on the Kubernetes datastore
// (real kube-apiserver with the CRDs) calico-node's initialisation is
// accepted: ClusterInformation's type ends in "kdd", the tiers, the
// default FelixConfiguration (no per-node one, as Calico on KDD), the
// BGP and IPAM configurations and the default pool exist; the Node
// (the Kubernetes Node) gets its BGP address through registration.
func TestIntegrationInitDatastoreKubernetes(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../../manifests/crds")
	c, err := kdd.New(kdd.Config{REST: rc, RequestTimeout: 5 * time.Second, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kube, err := clientset.For(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kn1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(envOf("NODENAME", "kn1", "CLUSTER_TYPE", "k8s,bgp", "CALICO_IPV4POOL_CIDR", "10.90.0.0/16",
		"CALICO_IPV4POOL_VXLAN", "Always"), "", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := InitDatastore(ctx, c, cfg, "v9", true, nil); err != nil {
		t.Fatal(err)
	}
	if err := InitDatastore(ctx, c, cfg, "v9", true, nil); err != nil {
		t.Fatalf("second initialisation: %v", err)
	}
	get := func(kind, name string) (v3.Resource, error) { return c.Get(ctx, datastore.Key{Kind: kind, Name: name}) }
	r, err := get(v3.KindClusterInformation, "default")
	if err != nil {
		t.Fatal(err)
	}
	if s := r.(*v3.ClusterInformation).Spec; s.ClusterType != "k8s,bgp,kdd" || s.CalicoVersion != "v9" || len(s.ClusterGUID) != 32 {
		t.Errorf("ClusterInformation %+v", s)
	}
	for _, key := range [][2]string{{v3.KindTier, "default"}, {v3.KindTier, "kube-admin"}, {v3.KindTier, "kube-baseline"},
		{v3.KindFelixConfiguration, "default"}, {v3.KindBGPConfiguration, "default"}, {v3.KindIPAMConfiguration, "default"},
		{v3.KindIPPool, DefaultIPv4PoolName}} {
		if _, err := get(key[0], key[1]); err != nil {
			t.Errorf("%s %s: %v", key[0], key[1], err)
		}
	}
	if _, err := get(v3.KindFelixConfiguration, "node.kn1"); !errors.Is(err, datastore.ErrNotFound) {
		t.Errorf("FelixConfiguration node.kn1 on KDD: %v, want none", err)
	}
	if _, err := registration.Register(ctx, c, registration.Config{NodeName: "kn1", IPv4: "10.0.0.7/24", IPv6: "none"}, registration.Env{}); err != nil {
		t.Fatal(err)
	}
	r, err = get(v3.KindNode, "kn1")
	if err != nil {
		t.Fatal(err)
	}
	if bgp := r.(*v3.Node).Spec.BGP; bgp == nil || bgp.IPv4Address != "10.0.0.7/24" {
		t.Errorf("Node kn1's BGP spec %+v", bgp)
	}
}
