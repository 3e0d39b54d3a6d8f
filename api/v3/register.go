package v3

import (
	"fmt"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Group, Version and GroupVersion of the user-facing API.
const (
	Group        = "projectcalico.org"
	Version      = "v3"
	GroupVersion = Group + "/" + Version
)

// CRDGroup and CRDVersion name the CustomResourceDefinitions that store the
// same resources in the Kubernetes datastore.
const (
	CRDGroup        = "crd.projectcalico.org"
	CRDVersion      = "v1"
	CRDGroupVersion = CRDGroup + "/" + CRDVersion
)

// Resource is what every kind in this package implements: a Kubernetes
// object (type and object metadata, deep copy) that can fill in Calico's
// defaults and validate itself.
// +kubebuilder:object:generate=false
type Resource interface {
	runtime.Object
	metav1.Object
	// Default fills unset fields with Calico's defaults. It is idempotent.
	Default()
	// Validate checks the resource as it would be stored (call Default
	// first). It returns nil or an ErrorList naming each bad field.
	Validate() ErrorList
}

// KindInfo describes one kind of resource.
// +kubebuilder:object:generate=false
type KindInfo struct {
	Kind       string // e.g. "IPPool"
	Plural     string // lower-case plural, e.g. "ippools"; also the CRD plural
	Namespaced bool
	// New returns an empty object of this kind with TypeMeta set.
	New func() Resource
	// NewList returns an empty list of this kind with TypeMeta set.
	NewList func() runtimeObject
	// ReadOnly kinds are written by Calico's components only: Calico's
	// calicoctl refuses to create, apply, replace or delete them
	// ("operation create or apply is not supported on ClusterInformation").
	ReadOnly bool
}

var (
	kindsMu sync.RWMutex
	kinds   = map[string]KindInfo{}
)

// register records a kind. Each kind's file calls it from init.
func register(k KindInfo) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[k.Kind]; dup {
		panic(fmt.Sprintf("kind %s registered twice", k.Kind))
	}
	kinds[k.Kind] = k
}

// LookupKind returns the KindInfo for a kind name (exact, e.g. "IPPool").
func LookupKind(kind string) (KindInfo, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	k, ok := kinds[kind]
	return k, ok
}

// Kinds returns every registered kind, sorted by name.
func Kinds() []KindInfo {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	out := make([]KindInfo, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// typeMeta returns the TypeMeta for a kind of this API.
func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: GroupVersion}
}

// runtimeObject is runtime.Object, named so kind files need not import runtime.
type runtimeObject = runtime.Object
