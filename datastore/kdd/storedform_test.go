package kdd

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestBlockAffinityStoredForm: a BlockAffinity is stored as Calico's CRD
// has it (spec.deleted a string, the lookup labels on the CR), and one
// Calico wrote reads back as the v3 object.
func TestBlockAffinityStoredForm(t *testing.T) {
	info, _ := v3.LookupKind(v3.KindBlockAffinity)
	ba := &v3.BlockAffinity{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindBlockAffinity, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-fd00--40-122", ResourceVersion: "3"},
		Spec:       v3.BlockAffinitySpec{State: v3.BlockAffinityStateConfirmed, Node: "node-1", Type: "host", CIDR: "fd00::40/122"},
	}
	u, err := toCR(ba)
	if err != nil {
		t.Fatal(err)
	}
	if d, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "deleted"); d != "false" {
		t.Errorf("spec.deleted stored as %#v, want the string \"false\"", d)
	}
	want := map[string]string{
		"projectcalico.org/hostname-hash": "A3XPYDATRKB7Q4SM2O5FN4RXIHBFIL2PITFX26BAIP5XAB2X74CA",
		"projectcalico.org/affinity-type": "host",
		"projectcalico.org/ip-version":    "6",
	}
	if d := cmp.Diff(want, u.GetLabels()); d != "" {
		t.Errorf("CR labels (-want +got):\n%s", d)
	}
	back, err := fromCR(info, u)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ba, back); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}

	// As Calico writes one being deleted: the labels also in its metadata
	// annotation.
	calico := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.projectcalico.org/v1", "kind": "BlockAffinity",
		"metadata": map[string]any{
			"name": "node-2-10-1-54-64-26", "resourceVersion": "9",
			"labels":      map[string]any{"projectcalico.org/hostname-hash": "x", "projectcalico.org/affinity-type": "host", "projectcalico.org/ip-version": "4"},
			"annotations": map[string]any{metadataAnnotation: `{"labels":{"projectcalico.org/hostname-hash":"x","projectcalico.org/affinity-type":"host","projectcalico.org/ip-version":"4"}}`},
		},
		"spec": map[string]any{"state": "confirmed", "node": "node-2", "cidr": "10.1.54.64/26", "deleted": "true"},
	}}
	got, err := fromCR(info, calico)
	if err != nil {
		t.Fatal(err)
	}
	a := got.(*v3.BlockAffinity)
	if !a.Spec.Deleted || a.Spec.Node != "node-2" || a.Spec.CIDR != "10.1.54.64/26" || len(a.Labels) != 0 {
		t.Errorf("Calico's affinity read as %+v (labels %v)", a.Spec, a.Labels)
	}
	if _, ok := calico.GetLabels()["projectcalico.org/ip-version"]; !ok {
		t.Error("reading changed the caller's object")
	}

	for _, d := range []any{"", false} {
		unstructured.SetNestedField(calico.Object, d, "spec", "deleted")
		if got, err := fromCR(info, calico); err != nil || got.(*v3.BlockAffinity).Spec.Deleted {
			t.Errorf("deleted %#v: %v %v", d, got, err)
		}
	}
	unstructured.SetNestedField(calico.Object, "maybe", "spec", "deleted")
	if _, err := fromCR(info, calico); err == nil || !strings.Contains(err.Error(), "maybe") {
		t.Errorf("deleted \"maybe\" read without error: %v", err)
	}
}

// TestIPAMConfigurationStoredForm: IPAMConfiguration is the ipamconfigs
// CR of kind IPAMConfig, autoAllocateBlocks always written, and an
// ipCooldownSeconds (which Calico's CRD lacks) refused.
func TestIPAMConfigurationStoredForm(t *testing.T) {
	info, _ := v3.LookupKind(v3.KindIPAMConfiguration)
	if gvr := crdGVR(info); gvr.Resource != "ipamconfigs" || gvr.Group != "crd.projectcalico.org" || gvr.Version != "v1" {
		t.Errorf("stored in %v", gvr)
	}
	cfg := &v3.IPAMConfiguration{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPAMConfiguration, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       v3.IPAMConfigurationSpec{StrictAffinity: true, MaxBlocksPerHost: 4},
	}
	u, err := toCR(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if d := cmp.Diff(map[string]any{"strictAffinity": true, "autoAllocateBlocks": true, "maxBlocksPerHost": int64(4)}, spec); d != "" || u.GetKind() != "IPAMConfig" {
		t.Errorf("kind %s spec (-want +got):\n%s", u.GetKind(), d)
	}
	back, err := fromCR(info, u)
	if err != nil {
		t.Fatal(err)
	}
	c := back.(*v3.IPAMConfiguration)
	if v3.KindOf(c) != v3.KindIPAMConfiguration || !c.Spec.StrictAffinity || c.Spec.MaxBlocksPerHost != 4 || c.Spec.AutoAllocateBlocks == nil || !*c.Spec.AutoAllocateBlocks {
		t.Errorf("read back as %s %+v", v3.KindOf(c), c.Spec)
	}
	cfg.Spec.IPCooldownSeconds = 30
	if _, err := toCR(cfg); !errors.Is(err, datastore.ErrInvalid) {
		t.Errorf("ipCooldownSeconds stored: %v", err)
	}
}

// TestStatusOnlyWhereCalicoHasOne: an IPPool's status is not sent (Calico's
// CRD has none), a CalicoNodeStatus's is.
func TestStatusOnlyWhereCalicoHasOne(t *testing.T) {
	pool := &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       v3.IPPoolSpec{CIDR: "10.0.0.0/16"},
		Status:     &v3.IPPoolStatus{Conditions: []metav1.Condition{{Type: "Allocatable", Status: metav1.ConditionTrue, Reason: "OK"}}},
	}
	u, err := toCR(pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["status"]; ok {
		t.Errorf("IPPool status sent: %v", u.Object["status"])
	}
	ns := &v3.CalicoNodeStatus{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindCalicoNodeStatus, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status:     v3.CalicoNodeStatusStatus{Agent: v3.CalicoNodeAgentStatus{BIRDV4: v3.BGPDaemonStatus{State: "Ready"}}},
	}
	if u, err = toCR(ns); err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["status"]; !ok {
		t.Error("CalicoNodeStatus status not sent")
	}
}
