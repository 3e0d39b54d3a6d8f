package kdd

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// NamespaceToProfile converts a namespace to Calico's profile
// "kns.<namespace>": it allows all traffic (policy does the restricting)
// and gives every endpoint of the namespace the namespace's labels, as
// "pcns.<key>", plus "pcns.projectcalico.org/name: <namespace>".
func NamespaceToProfile(ns *corev1.Namespace) (*v3.Profile, error) {
	labels := make(map[string]string, len(ns.Labels)+1)
	for k, v := range ns.Labels {
		labels[namespaceLabelPrefix+k] = v
	}
	labels[namespaceLabelPrefix+nameLabel] = ns.Name
	uid, err := derivedUID(ns.UID)
	if err != nil {
		return nil, err
	}
	return &v3.Profile{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name:              namespaceProfilePrefix + ns.Name,
			ResourceVersion:   ns.ResourceVersion,
			UID:               uid,
			CreationTimestamp: ns.CreationTimestamp,
		},
		Spec: v3.ProfileSpec{
			Ingress:       []v3.Rule{{Action: v3.Allow}},
			Egress:        []v3.Rule{{Action: v3.Allow}},
			LabelsToApply: labels,
		},
	}, nil
}

// ServiceAccountToProfile converts a service account to Calico's profile
// "ksa.<namespace>.<name>": no rules, and labels "pcsa.<key>" plus
// "pcsa.projectcalico.org/name: <name>" for the pods running as it.
func ServiceAccountToProfile(sa *corev1.ServiceAccount) (*v3.Profile, error) {
	labels := make(map[string]string, len(sa.Labels)+1)
	for k, v := range sa.Labels {
		labels[serviceAccountLabelPrefix+k] = v
	}
	labels[serviceAccountLabelPrefix+nameLabel] = sa.Name
	uid, err := derivedUID(sa.UID)
	if err != nil {
		return nil, err
	}
	return &v3.Profile{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name:              serviceAccountProfileName(sa.Namespace, sa.Name),
			ResourceVersion:   sa.ResourceVersion,
			UID:               uid,
			CreationTimestamp: sa.CreationTimestamp,
		},
		Spec: v3.ProfileSpec{LabelsToApply: labels},
	}, nil
}

// DefaultAllowProfile is Calico's built-in profile
// "projectcalico-default-allow", which allows everything; host endpoints
// name it to allow traffic where no policy applies.
func DefaultAllowProfile() *v3.Profile {
	return &v3.Profile{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: defaultAllowProfileName, ResourceVersion: "0"},
		Spec: v3.ProfileSpec{
			Ingress: []v3.Rule{{Action: v3.Allow}},
			Egress:  []v3.Rule{{Action: v3.Allow}},
		},
	}
}

// profileNameToNamespace returns the namespace behind a "kns." profile.
func profileNameToNamespace(name string) (string, bool) {
	ns, ok := strings.CutPrefix(name, namespaceProfilePrefix)
	return ns, ok && ns != ""
}

// profileNameToServiceAccount returns the service account behind a
// "ksa.<namespace>.<name>" profile.
func profileNameToServiceAccount(name string) (ns, sa string, ok bool) {
	rest, ok := strings.CutPrefix(name, serviceAccountProfilePrefix)
	if !ok {
		return "", "", false
	}
	ns, sa, ok = strings.Cut(rest, ".")
	return ns, sa, ok && ns != "" && sa != ""
}

// derivedUID is ConvertUID, leaving an empty UID (an object not yet
// stored) empty.
func derivedUID(uid types.UID) (types.UID, error) {
	if uid == "" {
		return "", nil
	}
	return ConvertUID(uid)
}
