package kdd

import (
	"crypto/sha3"
	"encoding/base32"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd/crdv1"
)

// Calico's CRDs store most kinds as the v3 type itself, but not all; the
// exceptions are handled here, on the unstructured object, so that the
// generic conversion (crdmeta.go) stays one code path:
//
//   - IPAMConfiguration is the custom resource ipamconfigs, kind
//     IPAMConfig, with autoAllocateBlocks a required bool and no
//     ipCooldownSeconds (a non-zero one is refused).
//   - BlockAffinity's spec.deleted is a string ("true"/"false"), and the
//     CR carries the labels Calico's IPAM lists affinities by.
//   - status is kept only where Calico's CRD has one (CalicoNodeStatus,
//     KubeControllersConfiguration, the latter as a subresource);
//     elsewhere the API server would prune it, as it does for Calico, so
//     it is not sent.

// Labels Calico puts on every BlockAffinity custom resource so its IPAM can
// list one node's (or one address family's) affinities by label selector.
const (
	labelHostnameHash = "projectcalico.org/hostname-hash"
	labelAffinityType = "projectcalico.org/affinity-type"
	labelIPVersion    = "projectcalico.org/ip-version"
)

// DerivedKind says whether Calico's Kubernetes datastore derives a kind
// from Kubernetes' own objects (Node from nodes, Profile from namespaces
// and service accounts, WorkloadEndpoint from pods) and so has no CRD of
// it.
func DerivedKind(kind string) bool {
	switch kind {
	case v3.KindNode, v3.KindProfile, v3.KindWorkloadEndpoint:
		return true
	}
	return false
}

// crdResource is the resource (plural) of the CRD that stores a kind.
func crdResource(info v3.KindInfo) string {
	if info.Kind == v3.KindIPAMConfiguration {
		return crdv1.IPAMConfigPlural
	}
	return info.Plural
}

// CRDResource is the custom resource that stores a kind (ok false for the
// kinds derived from Kubernetes objects): what RBAC must grant on it.
func CRDResource(kind string) (schema.GroupVersionResource, bool) {
	info, ok := v3.LookupKind(kind)
	if !ok || DerivedKind(kind) {
		return schema.GroupVersionResource{}, false
	}
	return crdGVR(info), true
}

func crdGVR(info v3.KindInfo) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: v3.CRDGroup, Version: v3.CRDVersion, Resource: crdResource(info)}
}

// crdKind is the kind of the custom resource that stores a v3 kind.
func crdKind(kind string) string {
	if kind == v3.KindIPAMConfiguration {
		return crdv1.KindIPAMConfig
	}
	return kind
}

// crdHasStatus says whether Calico's CRD of a kind has a status.
func crdHasStatus(kind string) bool {
	return kind == v3.KindCalicoNodeStatus || kind == v3.KindKubeControllersConfiguration
}

// toStoredForm turns the generic CR of a v3 object into Calico's stored
// form of its kind.
func toStoredForm(kind string, u *unstructured.Unstructured) error {
	u.SetKind(crdKind(kind))
	if !crdHasStatus(kind) {
		delete(u.Object, "status")
	}
	switch kind {
	case v3.KindBlockAffinity:
		deleted, _, err := unstructured.NestedBool(u.Object, "spec", "deleted")
		if err != nil {
			return fmt.Errorf("BlockAffinity %s: spec.deleted: %w", u.GetName(), err)
		}
		if err := unstructured.SetNestedField(u.Object, strconv.FormatBool(deleted), "spec", "deleted"); err != nil {
			return err
		}
		setAffinityLabels(u)
	case v3.KindIPAMConfiguration:
		// Calico v3.32's ipamconfigs CRD has no ipCooldownSeconds (its own
		// KDD client drops the field): refuse rather than lose it.
		if secs, _, _ := unstructured.NestedInt64(u.Object, "spec", "ipCooldownSeconds"); secs != 0 {
			return fmt.Errorf("%w: IPAMConfiguration spec.ipCooldownSeconds cannot be stored in the Kubernetes datastore (Calico's ipamconfigs CRD has no such field): leave it unset", datastore.ErrInvalid)
		}
		unstructured.RemoveNestedField(u.Object, "spec", "ipCooldownSeconds")
		// Calico's CRD requires autoAllocateBlocks; unset means true.
		if _, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "autoAllocateBlocks"); !ok {
			if err := unstructured.SetNestedField(u.Object, true, "spec", "autoAllocateBlocks"); err != nil {
				return err
			}
		}
	}
	return nil
}

// fromStoredForm turns Calico's stored form of a kind back into the shape
// of the v3 type, in place (u is the caller's copy).
func fromStoredForm(kind string, u *unstructured.Unstructured) error {
	if kind != v3.KindBlockAffinity {
		return nil
	}
	switch d, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "deleted"); d := d.(type) {
	case nil, bool:
		// Absent, or a bool (written before Tabby used Calico's CRD).
	case string:
		deleted := false
		if d != "" {
			var err error
			if deleted, err = strconv.ParseBool(d); err != nil {
				return fmt.Errorf("BlockAffinity %s: spec.deleted %q is not a boolean: %w", u.GetName(), d, err)
			}
		}
		if err := unstructured.SetNestedField(u.Object, deleted, "spec", "deleted"); err != nil {
			return err
		}
	default:
		return fmt.Errorf("BlockAffinity %s: spec.deleted is a %T, want a string", u.GetName(), d)
	}
	return nil
}

// dropStoredOnlyLabels removes from a v3 object's labels those that only
// the stored form carries: a BlockAffinity's lookup labels restate its
// spec, and Calico writes them to the CR and its metadata annotation.
func dropStoredOnlyLabels(kind string, labels map[string]string) {
	if kind != v3.KindBlockAffinity {
		return
	}
	for _, k := range []string{labelHostnameHash, labelAffinityType, labelIPVersion} {
		delete(labels, k)
	}
}

var base32NoPad = base32.StdEncoding.WithPadding(base32.NoPadding)

// HostnameLabelHash is the value of a BlockAffinity's
// projectcalico.org/hostname-hash label: a node name can be longer than a
// label value may be, so Calico labels with the unpadded base32 of its
// SHA3-256 instead.
func HostnameLabelHash(node string) string {
	h := sha3.Sum256([]byte(node))
	return base32NoPad.EncodeToString(h[:])
}
