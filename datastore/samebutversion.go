package datastore

import (
	"k8s.io/apimachinery/pkg/api/equality"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// SameButVersion reports whether a and b are the same resource state,
// differing at most in their resource version. On the Kubernetes
// datastore a native object's write that Calico's view of it does not
// show (a kubelet's Node status heartbeat, a pod's readiness) gives the
// converted resource a new version and nothing else: watches drop such an
// event rather than have every node's felix, confd and Typha act on a
// change that is not one (as Calico's dedupe buffers do).
func SameButVersion(a, b v3.Resource) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.GetResourceVersion() == b.GetResourceVersion() {
		return equality.Semantic.DeepEqual(a, b)
	}
	ac, ok := a.DeepCopyObject().(v3.Resource)
	if !ok {
		return false
	}
	ac.SetResourceVersion(b.GetResourceVersion())
	return equality.Semantic.DeepEqual(ac, b)
}
