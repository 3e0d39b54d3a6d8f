//go:build integration

package commands

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// TestGetListsPastUndecodableRecords: with one IPPool record that cannot
// be decoded (written with etcdctl at Calico's key), `get ippools` lists
// the others exactly as before and names the bad one on stderr (exit 0,
// as Calico, which leaves such records out); getting it by name fails
// saying it is damaged; `delete` removes it.
func TestGetListsPastUndecodableRecords(t *testing.T) {
	b := etcdBackend(t)
	testGetPastUndecodable(t, b, "/calico/resources/v3/projectcalico.org/ippools/broken", func() {
		raw, err := clientv3.New(clientv3.Config{Endpoints: []string{b.env["ETCD_ENDPOINTS"]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := raw.Put(ctx, "/calico/resources/v3/projectcalico.org/ippools/broken", `{"kind":"IPPool","spec":{"cidr":`); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGetListsPastUndecodableRecordsKubernetes: the same over the
// Kubernetes API, with an IPPool custom resource written with the dynamic
// client whose Calico metadata annotation has a field of the wrong type.
func TestGetListsPastUndecodableRecordsKubernetes(t *testing.T) {
	b := kubeBackend(t)
	testGetPastUndecodable(t, b, "ippools.crd.projectcalico.org/broken", func() {
		rc, err := clientcmd.BuildConfigFromFlags("", b.env["KUBECONFIG"])
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "crd.projectcalico.org/v1", "kind": "IPPool",
			"metadata": map[string]any{"name": "broken", "annotations": map[string]any{"projectcalico.org/metadata": `{"labels":123}`}},
			"spec":     map[string]any{"cidr": "10.99.0.0/24"},
		}}
		gvr := schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ippools"}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := dynamic.NewForConfigOrDie(rc).Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

func testGetPastUndecodable(t *testing.T, b cliBackend, storageKey string, putBad func()) {
	if out, code := b.run(t, "", args("create -f testdata/cli/pools.yaml")...); code != 0 {
		t.Fatal(out)
	}
	good, _ := b.run(t, "", args("get ippools")...)
	putBad()

	out, code := b.run(t, "", args("get ippools")...)
	t.Log(out)
	if code != 0 {
		t.Fatalf("get ippools with one bad record: exit %d\n%s", code, out)
	}
	if !strings.HasPrefix(out, good) {
		t.Errorf("good pools not listed as before:\n got %s\nwant (prefix) %s", out, good)
	}
	if !strings.Contains(out, `Warning: IPPool "broken" not listed`) || !strings.Contains(out, storageKey) ||
		!strings.Contains(out, "calicoctl delete ippool broken") {
		t.Errorf("bad record not reported:\n%s", out)
	}
	if out, code := b.run(t, "", args("get ippool broken")...); code != 1 || !strings.Contains(out, "cannot be decoded") {
		t.Errorf("get of the bad record:\n%s", out)
	}
	if out, code := b.run(t, "", args("delete ippool broken")...); code != 0 {
		t.Errorf("delete of the bad record:\n%s", out)
	}
	if out, _ := b.run(t, "", args("get ippools")...); out != good {
		t.Errorf("after delete:\n got %s\nwant %s", out, good)
	}
}
