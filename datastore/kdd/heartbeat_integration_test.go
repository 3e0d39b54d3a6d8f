//go:build integration

package kdd

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestWritesCalicoDoesNotSeeAreNotChanges: a kubelet's Node status
// heartbeat and a pod's readiness change give the converted Node and
// WorkloadEndpoint a new resource version and nothing else; neither the
// informer syncer (felix, confd, Typha) nor a watch (datastore.WatchSyncer)
// delivers them, while a real change right after is delivered at its
// version.
func TestWritesCalicoDoesNotSeeAreNotChanges(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := ctxT(t)
	must[*corev1.Namespace](t)(s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}))
	pods := s.kube.CoreV1().Pods("team-a")
	must[*corev1.Pod](t)(pods.Create(ctx, pod("web-1", "node-1", map[string]string{annotationPodIP: "10.0.0.5"}), metav1.CreateOptions{}))
	nodes := s.kube.CoreV1().Nodes()
	must[*corev1.Node](t)(nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1",
		Annotations: map[string]string{nodeIPv4Address: "192.168.1.10/24"}}}, metav1.CreateOptions{}))

	kinds := []string{v3.KindNode, v3.KindWorkloadEndpoint}
	informed := &recorder{view: map[datastore.Key]v3.Resource{}}
	runSyncer(t, NewSyncer(c, kinds, informed))
	watched := &recorder{view: map[datastore.Key]v3.Resource{}}
	runSyncer(t, datastore.NewWatchSyncer(c, kinds, watched, datastore.DefaultBackoff))
	for _, r := range []*recorder{informed, watched} {
		r.waitFor(t, "in sync", func() bool { return r.inSync && len(r.view) == 2 })
	}

	for i := range 3 {
		n := must[*corev1.Node](t)(nodes.Get(ctx, "node-1", metav1.GetOptions{}))
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second)), Reason: "KubeletReady"}}
		must[*corev1.Node](t)(nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}))
		p := must[*corev1.Pod](t)(pods.Get(ctx, "web-1", metav1.GetOptions{}))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionStatus([]string{"True", "False", "True"}[i])}}
		must[*corev1.Pod](t)(pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}))
	}
	n := must[*corev1.Node](t)(nodes.Get(ctx, "node-1", metav1.GetOptions{}))
	n.Labels = map[string]string{"rack": "r2"}
	relabelled := must[*corev1.Node](t)(nodes.Update(ctx, n, metav1.UpdateOptions{}))
	p := must[*corev1.Pod](t)(pods.Get(ctx, "web-1", metav1.GetOptions{}))
	p.Labels["tier"] = "front"
	web := must[*corev1.Pod](t)(pods.Update(ctx, p, metav1.UpdateOptions{}))

	nodeKey := datastore.Key{Kind: v3.KindNode, Name: "node-1"}
	for name, r := range map[string]*recorder{"informer syncer": informed, "watch syncer": watched} {
		r.waitFor(t, name+": the label changes", func() bool {
			for k, o := range r.view {
				if k == nodeKey && o.GetLabels()["rack"] != "r2" || k.Kind == v3.KindWorkloadEndpoint && o.GetLabels()["tier"] != "front" {
					return false
				}
			}
			return true
		})
		r.mu.Lock()
		modified := slices.DeleteFunc(slices.Clone(r.log), func(l string) bool { return !strings.HasPrefix(l, string(datastore.EventModified)) })
		if len(modified) != 2 {
			t.Errorf("%s: %d updates after the snapshot, want the 2 label changes only (3 heartbeats and 3 readiness changes are not changes):\n%s",
				name, len(modified), strings.Join(r.log, "\n"))
		}
		if got := r.view[nodeKey].GetResourceVersion(); got != relabelled.ResourceVersion {
			t.Errorf("%s: the Node delivered at version %s, want the relabelled %s", name, got, relabelled.ResourceVersion)
		}
		for k, o := range r.view {
			if k.Kind == v3.KindWorkloadEndpoint && o.GetResourceVersion() != web.ResourceVersion {
				t.Errorf("%s: the endpoint delivered at version %s, want the relabelled pod's %s", name, o.GetResourceVersion(), web.ResourceVersion)
			}
		}
		r.mu.Unlock()
	}
}
