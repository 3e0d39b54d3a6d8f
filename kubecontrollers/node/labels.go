package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// KubeLabelsAnnotation records, on a Calico node, the Kubernetes labels
// last copied to it (Calico's), so that a label removed in Kubernetes is
// removed from the Calico node while labels set there by others stay.
const KubeLabelsAnnotation = "projectcalico.org/kube-labels"

// SyncLabels copies the Kubernetes node's labels onto the Calico node:
// each is set, those copied before and gone from Kubernetes are removed,
// and the annotation records the copy. It reports whether n changed. An
// annotation that cannot be read is an error (removing nothing rather than
// guessing).
func SyncLabels(n *v3.Node, kube map[string]string) (bool, error) {
	old := map[string]string{}
	if a, ok := n.Annotations[KubeLabelsAnnotation]; ok {
		if err := json.Unmarshal([]byte(a), &old); err != nil {
			return false, fmt.Errorf("node %s: annotation %s: %w", n.Name, KubeLabelsAnnotation, err)
		}
	}
	labels := maps.Clone(n.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range kube {
		labels[k] = v
	}
	for k := range old {
		if _, ok := kube[k]; !ok {
			delete(labels, k)
		}
	}
	if kube == nil {
		kube = map[string]string{}
	}
	b, err := json.Marshal(kube)
	if err != nil {
		return false, err
	}
	changed := !maps.Equal(labels, n.Labels) || n.Annotations[KubeLabelsAnnotation] != string(b)
	if !changed {
		return false, nil
	}
	n.Labels = labels
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[KubeLabelsAnnotation] = string(b)
	return true, nil
}

// syncAllLabels (etcd mode) brings every Calico node with a Kubernetes
// orchRef in step with its Kubernetes node's labels.
func (c *Controller) syncAllLabels(ctx context.Context) error {
	l, err := c.cfg.Client.List(ctx, v3.KindNode, datastore.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Calico nodes: %w", err)
	}
	var errs []error
	for _, r := range l.Items {
		n := r.(*v3.Node)
		kname, ok := kubernetesName(n)
		if !ok {
			continue
		}
		kn, err := c.nodes.Get(kname)
		if apierrors.IsNotFound(err) {
			continue // being deleted: the clean-up handles it
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changed, err := SyncLabels(n, kn.Labels)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !changed {
			continue
		}
		if _, err := c.cfg.Client.Update(ctx, n); err != nil && !errors.Is(err, datastore.ErrNotFound) {
			errs = append(errs, fmt.Errorf("updating the labels of Calico node %s: %w", n.Name, err))
			continue
		}
		c.log.Info("synced node labels", "node", n.Name, "kubernetesNode", kname)
	}
	return errors.Join(errs...)
}
