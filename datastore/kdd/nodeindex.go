package kdd

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// One node's BlockAffinities are read by label, as Calico's IPAM reads
// them (libcalico-go CalculateBlockAffinityLabelSelector): the API server
// answers a list of projectcalico.org/hostname-hash=<hash of the node>
// with that node's only, so an ADD's read does not grow with the cluster.
// Calico (v3.31 and later) and Tabby put the label on every affinity they
// write; affinities written by older Calico releases lack it and are
// invisible to such a list until IndexNode labels them (Calico's ipam
// UpgradeHost, run at calico-node start-up and by the CNI plugin).

var _ datastore.NodeIndexer = (*Client)(nil)

// nodeFilter is the label selector that narrows a BlockAffinity list to
// node's (empty for all) and the check of each listed object that makes
// the list exact whatever the labels say.
func nodeFilter(node string) (labelSelector string, keep func(v3.Resource) bool) {
	if node == "" {
		return "", func(v3.Resource) bool { return true }
	}
	return labelHostnameHash + "=" + HostnameLabelHash(node), func(r v3.Resource) bool {
		ba, ok := r.(*v3.BlockAffinity)
		return ok && ba.Spec.Node == node
	}
}

// IndexNode implements datastore.NodeIndexer: it labels node's
// BlockAffinity custom resources that lack Calico's lookup labels (those
// without projectcalico.org/affinity-type, as Calico's UpgradeHost
// selects them; the API server filters, so on an upgraded cluster the
// answer is empty) and returns how many it labelled. Only the node's own
// are changed, so nodes upgrading at once do not conflict; each update is
// a compare-and-swap on the read version, and one that lost to another
// writer is left (that writer, Calico or Tabby, labels what it writes, or
// the next call finds it again).
func (c *Client) IndexNode(ctx context.Context, kind, node string, cached bool) (int, error) {
	if kind != v3.KindBlockAffinity || node == "" {
		return 0, fmt.Errorf("%w: only BlockAffinities of a named node are indexed by node", datastore.ErrInvalid)
	}
	kb, err := c.backend(kind)
	if err != nil {
		return 0, err
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	ri := c.crd(kb, "")
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, o)
	}))
	var unlabelled []unstructured.Unstructured
	err = p.EachListItem(ctx, metav1.ListOptions{LabelSelector: "!" + labelAffinityType, ResourceVersion: cachedRV(cached)}, func(o runtime.Object) error {
		u, ok := o.(*unstructured.Unstructured)
		if ok {
			if n, _, _ := unstructured.NestedString(u.Object, "spec", "node"); n == node {
				unlabelled = append(unlabelled, *u)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing unlabelled block affinities: %w", c.storeErr(err))
	}
	done := 0
	for _, u := range unlabelled {
		setAffinityLabels(&u)
		_, err := ri.Update(ctx, &u, metav1.UpdateOptions{})
		switch {
		case err == nil:
			done++
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		default:
			return done, fmt.Errorf("labelling block affinity %s of node %s: %w", u.GetName(), node, c.storeErr(err))
		}
	}
	return done, nil
}

// setAffinityLabels puts Calico's lookup labels on a BlockAffinity
// custom resource, from its spec (libcalico-go EnsureBlockAffinityLabels).
func setAffinityLabels(u *unstructured.Unstructured) {
	node, _, _ := unstructured.NestedString(u.Object, "spec", "node")
	typ, _, _ := unstructured.NestedString(u.Object, "spec", "type")
	cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[labelHostnameHash] = HostnameLabelHash(node)
	labels[labelAffinityType] = typ
	labels[labelIPVersion] = "4"
	if strings.Contains(cidr, ":") {
		labels[labelIPVersion] = "6"
	}
	u.SetLabels(labels)
}
