package mirror

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
)

// Calico's names for mirrored resources.
const (
	PolicyPrefix           = "knp.default."
	NamespaceProfilePrefix = "kns."
	AccountProfilePrefix   = "ksa."
)

// Policy mirrors Kubernetes NetworkPolicies to NetworkPolicies
// "knp.default.<name>" in the policy's namespace (tier default, order
// 1000), converted as the Kubernetes datastore serves them.
func Policy(inf cache.SharedIndexInformer, period time.Duration) Spec {
	return Spec{
		Name: "policy", Informer: inf, Kind: v3.KindNetworkPolicy, Period: period,
		Target: func(key string) datastore.Key {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			return datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: ns, Name: PolicyPrefix + name}
		},
		Source: func(r v3.Resource) (string, bool) {
			name, ok := strings.CutPrefix(r.GetName(), PolicyPrefix)
			return r.GetNamespace() + "/" + name, ok && name != ""
		},
		Desired: func(obj any) (v3.Resource, error) {
			np, ok := obj.(*networkingv1.NetworkPolicy)
			if !ok {
				return nil, fmt.Errorf("not a NetworkPolicy: %T", obj)
			}
			pol, err := kdd.K8sNetworkPolicyToCalico(np)
			if pol == nil {
				// Never fail open: a policy whose pods cannot be
				// selected isolates every pod of its namespace in its
				// directions instead of none.
				return denyAll(np), err
			}
			return pol, err
		},
	}
}

// denyAll is the fail-closed stand-in for an unconvertible policy: every
// Kubernetes pod of the namespace, no rules, in the policy's directions.
func denyAll(np *networkingv1.NetworkPolicy) *v3.NetworkPolicy {
	types := []v3.PolicyType{v3.PolicyTypeIngress}
	for _, t := range np.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeEgress {
			types = append(types, v3.PolicyTypeEgress)
		}
	}
	order := float64(1000)
	return &v3.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyPrefix + np.Name, Namespace: np.Namespace},
		Spec: v3.NetworkPolicySpec{Tier: v3.DefaultTierName, Order: &order,
			Selector: "projectcalico.org/orchestrator == 'k8s'", Types: types},
	}
}

// Namespaces mirrors namespaces to Profiles "kns.<namespace>" (allow
// all; the namespace's labels as pcns.* labels for its endpoints).
func Namespaces(inf cache.SharedIndexInformer, period time.Duration) Spec {
	return Spec{
		Name: "namespace", Informer: inf, Kind: v3.KindProfile, Period: period,
		Target: func(key string) datastore.Key {
			return datastore.Key{Kind: v3.KindProfile, Name: NamespaceProfilePrefix + key}
		},
		Source: func(r v3.Resource) (string, bool) {
			ns, ok := strings.CutPrefix(r.GetName(), NamespaceProfilePrefix)
			return ns, ok && ns != ""
		},
		Desired: func(obj any) (v3.Resource, error) {
			ns, ok := obj.(*corev1.Namespace)
			if !ok {
				return nil, fmt.Errorf("not a Namespace: %T", obj)
			}
			return kdd.NamespaceToProfile(ns)
		},
	}
}

// ServiceAccounts mirrors service accounts to Profiles
// "ksa.<namespace>.<name>" (no rules; pcsa.* labels).
func ServiceAccounts(inf cache.SharedIndexInformer, period time.Duration) Spec {
	return Spec{
		Name: "serviceaccount", Informer: inf, Kind: v3.KindProfile, Period: period,
		Target: func(key string) datastore.Key {
			ns, name, _ := cache.SplitMetaNamespaceKey(key)
			return datastore.Key{Kind: v3.KindProfile, Name: AccountProfilePrefix + ns + "." + name}
		},
		Source: func(r v3.Resource) (string, bool) {
			rest, ok := strings.CutPrefix(r.GetName(), AccountProfilePrefix)
			if !ok {
				return "", false
			}
			// Namespace names have no dots; service account names may.
			ns, sa, ok := strings.Cut(rest, ".")
			return ns + "/" + sa, ok && ns != "" && sa != ""
		},
		Desired: func(obj any) (v3.Resource, error) {
			sa, ok := obj.(*corev1.ServiceAccount)
			if !ok {
				return nil, fmt.Errorf("not a ServiceAccount: %T", obj)
			}
			return kdd.ServiceAccountToProfile(sa)
		},
	}
}

// ClusterPolicy mirrors Kubernetes ClusterNetworkPolicies (an informer of
// unstructured objects, kdd.NewClusterNetworkPolicyInformer) to
// GlobalNetworkPolicies "kcnp.<name>" in tier kube-admin or kube-baseline,
// converted as the Kubernetes datastore serves them (Calico reads them
// only in that datastore; Tabby mirrors them as it mirrors
// NetworkPolicies), but for a rule mixing IPv4 and IPv6 nets (Calico's
// conversion of networks of both versions), stored as one rule per
// version (v3.SplitMixedNets): etcd's write checks refuse the mixed rule.
// A rule that cannot be converted fails closed in the written policy.
func ClusterPolicy(inf cache.SharedIndexInformer, period time.Duration) Spec {
	return Spec{
		Name: "clusterpolicy", Informer: inf, Kind: v3.KindGlobalNetworkPolicy, Period: period,
		Target: func(key string) datastore.Key {
			return datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: kdd.ClusterNetworkPolicyNamePrefix + key}
		},
		Source: func(r v3.Resource) (string, bool) {
			name, ok := strings.CutPrefix(r.GetName(), kdd.ClusterNetworkPolicyNamePrefix)
			return name, ok && name != ""
		},
		Desired: func(obj any) (v3.Resource, error) {
			o, ok := obj.(runtime.Object)
			if !ok {
				return nil, fmt.Errorf("not a ClusterNetworkPolicy: %T", obj)
			}
			pol, err := kdd.UnstructuredCNPToCalico(o)
			if pol == nil {
				return nil, err
			}
			// etcd's write checks refuse Calico's mixed-version rule.
			pol.Spec.Ingress, pol.Spec.Egress = v3.SplitMixedNets(pol.Spec.Ingress), v3.SplitMixedNets(pol.Spec.Egress)
			return pol, err
		},
	}
}
