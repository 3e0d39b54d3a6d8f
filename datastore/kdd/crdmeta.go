package kdd

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kjson "sigs.k8s.io/json"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// metadataAnnotation holds a resource's projectcalico.org/v3 metadata on
// its crd.projectcalico.org/v1 object, exactly as Calico stores it: the
// v3 labels and annotations live there, not on the CR, so that Kubernetes
// controllers never act on a Calico label.
const metadataAnnotation = "projectcalico.org/metadata"

// tieredPolicyKind says whether a kind keeps its v3 name in the metadata
// annotation too, as Calico does for its tiered policy kinds. The CR name
// is the v3 name (Calico v3.30 and later); a CR written by an older
// release as "default.<name>" without the annotation reads as <name>.
func tieredPolicyKind(kind string) bool {
	switch kind {
	case v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy, v3.KindStagedNetworkPolicy, v3.KindStagedGlobalNetworkPolicy:
		return true
	}
	return false
}

// legacyPolicyName is the v3 name of a tiered policy CR written without
// the name in its metadata annotation: older releases stored default-tier
// policies as "default.<name>".
func legacyPolicyName(obj v3.Resource, crName string) string {
	if tier, tiered := datastore.PolicyTier(obj); tiered && tier == v3.DefaultTierName {
		return strings.TrimPrefix(crName, v3.DefaultTierName+".")
	}
	return crName
}

// ours says whether a label or annotation key is Calico's, and so is kept
// on the CR itself as well.
func ours(key string) bool {
	return strings.Contains(key, "projectcalico.org/") || strings.Contains(key, "operator.tigera.io/")
}

// toCR renders a v3 object as its crd.projectcalico.org/v1 object.
func toCR(obj v3.Resource) (*unstructured.Unstructured, error) {
	kind := v3.KindOf(obj)
	meta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)

	stash := meta.DeepCopy()
	stash.Namespace, stash.ResourceVersion, stash.UID = "", "", ""
	stash.ManagedFields = nil
	if !tieredPolicyKind(kind) {
		stash.Name = ""
	}
	refs := stash.OwnerReferences[:0]
	for _, ref := range stash.OwnerReferences {
		if ref.APIVersion == v3.GroupVersion {
			ref.APIVersion = v3.CRDGroupVersion
			uid, err := ConvertUID(ref.UID)
			if err != nil {
				return nil, fmt.Errorf("owner reference %s: %w", ref.Name, err)
			}
			ref.UID = uid
		}
		refs = append(refs, ref)
	}
	stash.OwnerReferences = refs
	stashJSON, err := marshalMeta(stash)
	if err != nil {
		return nil, err
	}

	cr := metav1.ObjectMeta{
		Name:            meta.Name,
		Namespace:       meta.Namespace,
		ResourceVersion: meta.ResourceVersion,
		Annotations:     map[string]string{metadataAnnotation: stashJSON},
	}
	if meta.UID != "" {
		if cr.UID, err = ConvertUID(meta.UID); err != nil {
			return nil, err
		}
	}
	for k, v := range meta.Labels {
		if ours(k) {
			if cr.Labels == nil {
				cr.Labels = map[string]string{}
			}
			cr.Labels[k] = v
		}
	}
	for k, v := range meta.Annotations {
		if ours(k) {
			cr.Annotations[k] = v
		}
	}

	c := obj.DeepCopyObject().(v3.Resource)
	cr.DeepCopyInto(c.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta))
	js, err := v3.EncodeJSON(c)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, err
	}
	u.SetAPIVersion(v3.CRDGroupVersion)
	if err := toStoredForm(kind, u); err != nil {
		return nil, err
	}
	return u, nil
}

// marshalMeta renders metadata for the annotation, leaving out an unset
// creation timestamp (which would otherwise be written as null).
func marshalMeta(m *metav1.ObjectMeta) (string, error) {
	js, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	var fields map[string]any
	if err := json.Unmarshal(js, &fields); err != nil {
		return "", err
	}
	if ts, ok := fields["creationTimestamp"]; ok && ts == nil {
		delete(fields, "creationTimestamp")
	}
	js, err = json.Marshal(fields)
	return string(js), err
}

// fromCR reads a crd.projectcalico.org/v1 object back as its v3 object
// (apiVersion projectcalico.org/v3 and the v3 kind, metadata from the
// annotation, the UID converted back).
func fromCR(info v3.KindInfo, u *unstructured.Unstructured) (v3.Resource, error) {
	u = u.DeepCopy()
	if err := fromStoredForm(info.Kind, u); err != nil {
		return nil, err
	}
	js, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	obj := info.New()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(js, obj); err != nil {
		return nil, fmt.Errorf("decoding %s %s: %w", info.Kind, u.GetName(), err)
	}
	obj.GetObjectKind().SetGroupVersionKind(info.New().GetObjectKind().GroupVersionKind())
	crMeta := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)

	meta := &metav1.ObjectMeta{}
	annotations := crMeta.Annotations
	if raw, ok := annotations[metadataAnnotation]; ok {
		if err := json.Unmarshal([]byte(raw), meta); err != nil {
			return nil, fmt.Errorf("%s %s: annotation %s: %w", info.Kind, u.GetName(), metadataAnnotation, err)
		}
		for i, ref := range meta.OwnerReferences {
			if ref.APIVersion == v3.CRDGroupVersion || ref.APIVersion == v3.GroupVersion {
				ref.APIVersion = v3.GroupVersion
				if ref.UID, err = ConvertUID(ref.UID); err != nil {
					return nil, err
				}
				meta.OwnerReferences[i] = ref
			}
		}
		delete(annotations, metadataAnnotation)
	}
	// Labels and annotations on the CR itself (Calico's own, or written by
	// an older Calico) are merged under those of the annotation.
	labels := crMeta.Labels
	for k, v := range meta.Labels {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = v
	}
	for k, v := range meta.Annotations {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[k] = v
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	dropStoredOnlyLabels(info.Kind, labels)
	if len(labels) == 0 {
		labels = nil
	}
	if meta.Name == "" {
		meta.Name = legacyPolicyName(obj, crMeta.Name)
	}
	meta.Namespace = crMeta.Namespace
	meta.ResourceVersion = crMeta.ResourceVersion
	meta.UID = ""
	if crMeta.UID != "" {
		if meta.UID, err = ConvertUID(crMeta.UID); err != nil {
			return nil, err
		}
	}
	meta.Labels = labels
	meta.Annotations = annotations
	if meta.CreationTimestamp.IsZero() {
		meta.CreationTimestamp = crMeta.CreationTimestamp
	}
	meta.ManagedFields = nil
	meta.DeepCopyInto(crMeta)
	return obj, nil
}
