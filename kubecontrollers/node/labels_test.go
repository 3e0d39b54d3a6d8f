package node

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func TestSyncLabels(t *testing.T) {
	n := &v3.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"mine": "1"}}}
	changed, err := SyncLabels(n, map[string]string{"zone": "a", "role": "x"})
	if err != nil || !changed {
		t.Fatalf("first sync: %v %v", changed, err)
	}
	if want := map[string]string{"mine": "1", "zone": "a", "role": "x"}; !maps.Equal(n.Labels, want) {
		t.Fatalf("labels %v, want %v", n.Labels, want)
	}
	// role removed in Kubernetes: removed here; mine (never Kubernetes') stays.
	changed, err = SyncLabels(n, map[string]string{"zone": "b"})
	if err != nil || !changed {
		t.Fatalf("second sync: %v %v", changed, err)
	}
	if want := map[string]string{"mine": "1", "zone": "b"}; !maps.Equal(n.Labels, want) {
		t.Fatalf("labels %v, want %v", n.Labels, want)
	}
	if changed, _ := SyncLabels(n, map[string]string{"zone": "b"}); changed {
		t.Fatal("no-op sync reported a change")
	}
	n.Annotations[KubeLabelsAnnotation] = "{not json"
	if _, err := SyncLabels(n, nil); err == nil {
		t.Fatal("unreadable annotation accepted")
	}
	if n.Labels["zone"] != "b" {
		t.Fatal("labels changed despite the unreadable annotation")
	}
}
