package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
)

// document is one YAML document of an apply/delete file.
type document struct {
	raw        []byte
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// splitDocuments splits a multi-document YAML file and refuses a kind
// the lab cannot apply, before anything is changed.
func splitDocuments(b []byte) ([]document, error) {
	var out []document
	for _, part := range docSeparator.Split(string(b), -1) {
		if strings.TrimSpace(stripComments(part)) == "" {
			continue
		}
		var d document
		if err := yaml.Unmarshal([]byte(part), &d); err != nil {
			return nil, fmt.Errorf("document %d: %w", len(out)+1, err)
		}
		d.raw = []byte(part)
		switch {
		case d.APIVersion == "networking.k8s.io/v1" && d.Kind == "NetworkPolicy":
		case d.APIVersion == cnpv1.GroupVersion.String() && d.Kind == "ClusterNetworkPolicy":
		case d.APIVersion == v3.GroupVersion:
		default:
			return nil, fmt.Errorf("document %d: %s %s: the lab applies projectcalico.org/v3 resources, networking.k8s.io/v1 NetworkPolicies and %s ClusterNetworkPolicies", len(out)+1, d.APIVersion, d.Kind, cnpv1.GroupVersion)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, errors.New("no resources in the file")
	}
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// Apply creates or updates (delete: removes) the resources of a file:
// Calico v3 resources through the project's calicoctl, Kubernetes
// NetworkPolicies through the Kubernetes API, or in etcd mode converted
// and stored as kube-controllers' policy controller stores them
// (knp.default.<name>), and ClusterNetworkPolicies through the Kubernetes
// API (felix reads them as kcnp.<name>; in etcd mode kube-controllers
// mirrors them). It returns what felix will read of them (with the
// versions written), for WaitProgrammed.
func (l *Lab) Apply(ctx context.Context, data []byte, del bool) ([]PolicyRef, error) {
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, err
	}
	var calico [][]byte
	var refs []PolicyRef
	for _, d := range docs {
		if d.APIVersion == v3.GroupVersion {
			calico = append(calico, d.raw)
			r, err := calicoRef(d)
			if err != nil {
				return nil, err
			}
			if r != nil {
				refs = append(refs, *r)
			}
			continue
		}
		if d.Kind == "ClusterNetworkPolicy" {
			ref, err := l.applyCNP(ctx, d.raw, del)
			if err != nil {
				return nil, err
			}
			refs = append(refs, ref)
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := yaml.UnmarshalStrict(d.raw, &np); err != nil {
			return nil, fmt.Errorf("NetworkPolicy: %w", err)
		}
		if np.Namespace == "" {
			np.Namespace = "default"
		}
		pol, err := l.applyK8sPolicy(ctx, &np, del)
		if err != nil {
			return nil, err
		}
		ref := PolicyRef{Kind: v3.KindNetworkPolicy, Namespace: pol.Namespace, Name: pol.Name}
		if l.State.KubeControllers && l.State.Datastore != DatastoreKubernetes {
			ref.synced = pol.Spec
		}
		refs = append(refs, ref)
	}
	if len(calico) > 0 {
		if err := l.calicoctl(ctx, del, bytes.Join(calico, []byte("\n---\n"))); err != nil {
			return nil, err
		}
	}
	for i := range refs {
		refs[i].Deleted = del
	}
	if err := l.readBack(ctx, refs); err != nil {
		return nil, err
	}
	return refs, nil
}

// applyK8sPolicy stores one Kubernetes NetworkPolicy and returns the
// Calico policy it is enforced as.
func (l *Lab) applyK8sPolicy(ctx context.Context, np *networkingv1.NetworkPolicy, del bool) (*v3.NetworkPolicy, error) {
	pol, err := kdd.K8sNetworkPolicyToCalico(np)
	if err != nil {
		// Refused whole: a partly converted policy would allow less
		// than it says, silently.
		return nil, fmt.Errorf("NetworkPolicy %s/%s cannot be enforced as written: %w", np.Namespace, np.Name, err)
	}
	pol.ResourceVersion = ""
	if l.State.Datastore == DatastoreKubernetes || l.State.KubeControllers {
		kc, err := l.kube()
		if err != nil {
			return nil, err
		}
		api := kc.NetworkingV1().NetworkPolicies(np.Namespace)
		if del {
			if err := api.Delete(ctx, np.Name, metav1.DeleteOptions{}); err != nil {
				return nil, fmt.Errorf("deleting NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
			}
			return pol, nil
		}
		cur, err := api.Get(ctx, np.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, np, metav1.CreateOptions{})
		case err == nil:
			np.ResourceVersion = cur.ResourceVersion
			_, err = api.Update(ctx, np, metav1.UpdateOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("storing NetworkPolicy %s/%s: %w", np.Namespace, np.Name, err)
		}
		return pol, nil
	}
	c, err := l.client()
	if err != nil {
		return nil, err
	}
	key := datastore.KeyOf(pol)
	if del {
		if _, err := c.Delete(ctx, key, datastore.DeleteOptions{}); err != nil {
			return nil, fmt.Errorf("deleting %s/%s: %w", pol.Namespace, pol.Name, err)
		}
		return pol, nil
	}
	cur, err := c.Get(ctx, key)
	switch {
	case errors.Is(err, datastore.ErrNotFound):
		_, err = c.Create(ctx, pol)
	case err == nil:
		pol.ResourceVersion = cur.GetResourceVersion()
		_, err = c.Update(ctx, pol)
	}
	if err != nil {
		return nil, fmt.Errorf("storing %s/%s: %w", pol.Namespace, pol.Name, err)
	}
	return pol, nil
}

// calicoctl runs the project's calicoctl apply (or delete) on the
// documents, against the lab's datastore.
func (l *Lab) calicoctl(ctx context.Context, del bool, docs []byte) error {
	f, err := os.CreateTemp(l.Dir, "apply-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(docs); err != nil {
		f.Close()
		return err
	}
	f.Close()
	verb := "apply"
	if del {
		verb = "delete"
	}
	cmd := exec.CommandContext(ctx, filepath.Join(l.Bin, "calicoctl"), verb, "-f", f.Name())
	cmd.Env = append(os.Environ(), l.datastoreEnv()...)
	out, err := cmd.CombinedOutput()
	fmt.Fprint(l.Out, string(out))
	if err != nil {
		return fmt.Errorf("calicoctl %s: %w", verb, err)
	}
	return nil
}

// calicoRef is what felix reads of a Calico document: nil for kinds it
// does not list in its report (WorkloadEndpoints, configuration...).
func calicoRef(d document) (*PolicyRef, error) {
	if !slices.Contains(reportKinds, d.Kind) {
		return nil, nil
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(d.raw, &meta); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Kind, err)
	}
	ns := meta.Metadata.Namespace
	if ns == "" && (d.Kind == v3.KindNetworkPolicy || d.Kind == v3.KindNetworkSet) {
		ns = "default"
	}
	return &PolicyRef{Kind: d.Kind, Namespace: ns, Name: meta.Metadata.Name}, nil
}
