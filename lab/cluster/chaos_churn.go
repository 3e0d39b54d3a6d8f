package cluster

import (
	"context"
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// The chaos run's churn: Deployments scaled up and down and their pods
// deleted at random, through the API, so every pod's ADD and DEL comes
// from kubelet through containerd.

// churnDeployments are the churn's Deployments, each up to churnMax pods.
const churnMax = 6

func churnDeployments() []string { return []string{"churn-a", "churn-b", "churn-c"} }

// churner churns while the observer's count of created pods is below its
// goal; an API error (the datastore is down) just skips the action.
type churner struct {
	kc   kubernetes.Interface
	obs  *observer
	rnd  *rand.Rand
	goal atomic.Int64
}

// setGoal makes the churn run until n pods were created in all (0: stop).
func (ch *churner) setGoal(n int) { ch.goal.Store(int64(n)) }

func (ch *churner) run(ctx context.Context) {
	every(ctx, 200*time.Millisecond, func() bool {
		if int64(ch.obs.counts().created) >= ch.goal.Load() {
			return true
		}
		// At most a few pods being set up at once: 2 shared cores.
		pending := ch.obs.pods(func(p *corev1.Pod) bool {
			return p.Namespace == chaosChurn && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending
		})
		if len(pending) >= 8 {
			return true
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if ch.rnd.Intn(2) == 0 {
			ds := churnDeployments()
			_ = ch.scale(actx, ds[ch.rnd.Intn(len(ds))], ch.rnd.Intn(churnMax+1))
		} else {
			ch.deleteOne(actx)
		}
		return true
	})
}

// scale sets a churn Deployment's replicas.
func (ch *churner) scale(ctx context.Context, name string, n int) error {
	_, err := ch.kc.AppsV1().Deployments(chaosChurn).Patch(ctx, name, types.MergePatchType,
		[]byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)), metav1.PatchOptions{})
	return err
}

// deleteOne deletes a random running churn pod (its Deployment replaces it).
func (ch *churner) deleteOne(ctx context.Context) {
	pods := ch.obs.pods(func(p *corev1.Pod) bool { return p.Namespace == chaosChurn && live(p) })
	if len(pods) == 0 {
		return
	}
	p := pods[ch.rnd.Intn(len(pods))]
	zero := int64(0)
	_ = ch.kc.CoreV1().Pods(chaosChurn).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// deployment is an agnhost Deployment of replicas pods labelled
// app=name, on node when it is not "".
func deployment(ns, name, node string, replicas int32, args ...string) *appsv1.Deployment {
	pod := agnPod(ns, name, node, map[string]string{"app": name})
	pod.Spec.Containers[0].Args = args
	if node == "" {
		pod.Spec.NodeSelector = nil
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: sel,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}},
	}
}
