package confd

import (
	"context"
	"errors"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/render"
)

// DefaultSecretNamespace is where BGP password Secrets live when NAMESPACE
// is unset (Calico's confd: the namespace calico-node runs in, default
// kube-system).
const DefaultSecretNamespace = "kube-system"

// SecretNamespace returns the namespace BGP password Secrets are read
// from, with Calico's rule: $NAMESPACE, else kube-system.
func SecretNamespace(getenv func(string) string) string {
	if ns := getenv("NAMESPACE"); ns != "" {
		return ns
	}
	return DefaultSecretNamespace
}

// ErrSecretUnavailable is wrapped by a SecretGetter's error when the
// Secret cannot be had until something changes (it does not exist, access
// is forbidden, or the datastore holds no Secrets). Other errors are
// treated as transient and retried with backoff.
var ErrSecretUnavailable = errors.New("secret unavailable")

// SecretGetter reads one Secret of the namespace confd runs in.
// Implementations must never put a Secret's data into an error.
type SecretGetter interface {
	GetSecret(ctx context.Context, name string) (map[string][]byte, error)
}

// KubeSecrets reads Secrets with a Kubernetes clientset (in Kubernetes
// datastore mode, datastore/kdd/clientset). It needs only `get` on the
// named Secrets, so a Role restricted by resourceNames (as Calico's docs
// grant calico-node) is enough.
type KubeSecrets struct {
	Client    kubernetes.Interface
	Namespace string
}

// GetSecret implements SecretGetter.
func (k KubeSecrets) GetSecret(ctx context.Context, name string) (map[string][]byte, error) {
	s, err := k.Client.CoreV1().Secrets(k.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: secret %s not found in namespace %s", ErrSecretUnavailable, name, k.Namespace)
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%w: reading secret %s in namespace %s is forbidden (grant confd get on it): %v",
			ErrSecretUnavailable, name, k.Namespace, err)
	case err != nil:
		return nil, fmt.Errorf("reading secret %s in namespace %s: %w", name, k.Namespace, err)
	}
	return s.Data, nil
}

// NoSecrets is the SecretGetter for datastores without Secrets (etcdv3):
// every BGP password is reported as unavailable, saying why.
type NoSecrets struct {
	Datastore string // e.g. "etcdv3"
}

// GetSecret implements SecretGetter.
func (n NoSecrets) GetSecret(_ context.Context, name string) (map[string][]byte, error) {
	if n.Datastore == "" {
		return nil, fmt.Errorf("%w: secret %s: this confd has no access to Kubernetes Secrets", ErrSecretUnavailable, name)
	}
	return nil, fmt.Errorf("%w: secret %s: BGP passwords come from Kubernetes Secrets, which the %s datastore cannot provide (use DATASTORE_TYPE=kubernetes)",
		ErrSecretUnavailable, name, n.Datastore)
}

// secretRefs lists the Secret keys the resources' BGP passwords name,
// sorted and without duplicates.
func secretRefs(rs []v3.Resource) []render.SecretRef {
	seen := map[render.SecretRef]bool{}
	add := func(pw *v3.BGPPassword) {
		if pw != nil && pw.SecretKeyRef != nil {
			seen[render.SecretRef{Name: pw.SecretKeyRef.Name, Key: pw.SecretKeyRef.Key}] = true
		}
	}
	for _, r := range rs {
		switch o := r.(type) {
		case *v3.BGPPeer:
			add(o.Spec.Password)
		case *v3.BGPConfiguration:
			add(o.Spec.NodeMeshPassword)
		}
	}
	out := make([]render.SecretRef, 0, len(seen))
	for ref := range seen {
		out = append(out, ref)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// resolveSecrets reads each named Secret once. Keys that cannot be had
// are left out of the map (the renderer then refuses the peerings that
// need them) and explained in reasons; err is a transient read failure.
// Neither reasons nor err ever hold a password.
func resolveSecrets(ctx context.Context, g SecretGetter, refs []render.SecretRef) (map[render.SecretRef]string, []string, error) {
	if len(refs) == 0 {
		return nil, nil, nil
	}
	if g == nil {
		g = NoSecrets{}
	}
	out := map[render.SecretRef]string{}
	var reasons []string
	data := map[string]map[string][]byte{}
	failed := map[string]bool{}
	for _, ref := range refs {
		if failed[ref.Name] {
			continue
		}
		d, ok := data[ref.Name]
		if !ok {
			var err error
			d, err = g.GetSecret(ctx, ref.Name)
			if errors.Is(err, ErrSecretUnavailable) {
				failed[ref.Name] = true
				reasons = append(reasons, err.Error())
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			data[ref.Name] = d
		}
		v, ok := d[ref.Key]
		if !ok {
			reasons = append(reasons, fmt.Sprintf("secret %s has no key %s", ref.Name, ref.Key))
			continue
		}
		out[ref] = string(v)
	}
	return out, reasons, nil
}
