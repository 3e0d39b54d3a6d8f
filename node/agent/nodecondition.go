package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tabbynet/tabby/node/health"
)

// networkReadyTimeout is how long calico-node waits to be ready before it
// clears the condition anyway (Calico's 5 minutes: a node is never left
// unschedulable by a slow start).
const networkReadyTimeout = 5 * time.Minute

// MarkNetworkAvailable sets the Kubernetes Node's NetworkUnavailable
// condition to False (reason CalicoIsUp), as Calico's calico-node does once
// it runs: a patch of the node's status.
func MarkNetworkAvailable(ctx context.Context, kube kubernetes.Interface, node string, now time.Time) error {
	t := metav1.NewTime(now)
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "CalicoIsUp",
		Message: "Calico is running on this node", LastTransitionTime: t, LastHeartbeatTime: t,
	}}}})
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().Nodes().PatchStatus(ctx, node, patch); err != nil {
		return fmt.Errorf("clearing node %s's NetworkUnavailable condition: %w", node, err)
	}
	return nil
}

// manageNodeCondition waits until the agent is ready (at most
// networkReadyTimeout), then clears the condition, retrying until it is
// written or ctx ends.
func manageNodeCondition(ctx context.Context, agg *health.Aggregator, kube kubernetes.Interface, node string, log *slog.Logger) error {
	deadline := time.Now().Add(networkReadyTimeout)
	for time.Now().Before(deadline) {
		if r, err := agg.Reports(); err == nil {
			if ok, _ := health.Summary(r, "readiness"); ok {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	for backoff := time.Second; ; backoff = min(2*backoff, time.Minute) {
		err := MarkNetworkAvailable(ctx, kube, node, time.Now())
		if err == nil {
			log.Info("cleared the node's NetworkUnavailable condition", "k8sNode", node)
			return nil
		}
		log.Warn("cannot clear the node's NetworkUnavailable condition yet", "error", err, "retryIn", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}
