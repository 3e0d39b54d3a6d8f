package lab

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
)

// applyCNP stores (del: deletes) one ClusterNetworkPolicy through the
// Kubernetes API and returns the GlobalNetworkPolicy felix enforces it as
// (kcnp.<name>, kdd's conversion as Calico 3.32's). A rule the conversion
// cannot carry is not refused, as neither the API server nor Calico
// refuses it: felix enforces it fail-closed, and apply says so.
func (l *Lab) applyCNP(ctx context.Context, raw []byte, del bool) (PolicyRef, error) {
	var cnp cnpv1.ClusterNetworkPolicy
	if err := yaml.UnmarshalStrict(raw, &cnp); err != nil {
		return PolicyRef{}, fmt.Errorf("ClusterNetworkPolicy: %w", err)
	}
	gnp, err := kdd.K8sClusterNetworkPolicyToCalico(&cnp)
	var bad *kdd.CNPConversionError
	switch {
	case errors.As(err, &bad):
		fmt.Fprintf(l.Out, "warning: %v\n", bad)
	case err != nil:
		return PolicyRef{}, err
	}
	ref := PolicyRef{Kind: v3.KindGlobalNetworkPolicy, Name: gnp.Name}
	if l.State.Datastore != DatastoreKubernetes {
		// As kube-controllers stores it (mirror.ClusterPolicy).
		spec := gnp.Spec
		spec.Ingress, spec.Egress = v3.SplitMixedNets(spec.Ingress), v3.SplitMixedNets(spec.Egress)
		ref.synced = spec
	}
	if l.State.Kubeconfig == "" {
		return PolicyRef{}, fmt.Errorf("ClusterNetworkPolicy %s: the lab runs on etcd: no Kubernetes API to store it in", cnp.Name)
	}
	rc, err := l.restConfig()
	if err != nil {
		return PolicyRef{}, err
	}
	cs, err := cnpclient.NewForConfig(rc)
	if err != nil {
		return PolicyRef{}, err
	}
	api := cs.PolicyV1alpha2().ClusterNetworkPolicies()
	if del {
		if err := api.Delete(ctx, cnp.Name, metav1.DeleteOptions{}); err != nil {
			return PolicyRef{}, fmt.Errorf("deleting ClusterNetworkPolicy %s: %w", cnp.Name, err)
		}
		return ref, nil
	}
	cur, err := api.Get(ctx, cnp.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, &cnp, metav1.CreateOptions{})
	case err == nil:
		cnp.ResourceVersion = cur.ResourceVersion
		_, err = api.Update(ctx, &cnp, metav1.UpdateOptions{})
	}
	if err != nil {
		return PolicyRef{}, fmt.Errorf("storing ClusterNetworkPolicy %s: %w", cnp.Name, err)
	}
	return ref, nil
}
