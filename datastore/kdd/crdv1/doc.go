// Package crdv1 holds the crd.projectcalico.org/v1 forms of the kinds whose
// custom resource differs from the projectcalico.org/v3 type: Calico keeps
// its IPAM bookkeeping in CRDs written by libcalico-go's internal types,
// not by the v3 API types.
//
//   - BlockAffinity: spec.deleted is the string "true"/"false" (Calico's
//     CRD says so, for compatibility with releases that wrote a string).
//   - IPAMConfig: the CRD of the v3 kind IPAMConfiguration is ipamconfigs,
//     kind IPAMConfig, with autoAllocateBlocks a plain required bool and,
//     as of Calico v3.32, no ipCooldownSeconds.
//
// The types only describe the stored form: datastore/kdd converts them to
// and from the v3 types, and `make generate` builds their CRDs (they
// replace the ones controller-gen makes from api/v3 for the same kinds).
//
// +kubebuilder:object:generate=true
// +groupName=crd.projectcalico.org
// +versionName=v1
package crdv1
