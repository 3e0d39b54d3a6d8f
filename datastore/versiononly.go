package datastore

import (
	"k8s.io/apimachinery/pkg/api/equality"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// VersionOnlyChange reports whether b is a change of a that syncers do not
// deliver: a Node or WorkloadEndpoint whose state is a's but for its
// resource version. On the Kubernetes datastore the kubelet's writes Calico's
// view does not show (a Node's status heartbeat, a pod's readiness) give
// these a new version many times a minute; delivering them would have every
// node's felix, confd and Typha act on a change that is not one (Calico's
// dedupe buffers drop them too). Every other kind keeps each version:
// felix's endpoint report names the version of each resource it read, and
// a client waiting for its edit to be programmed (lab.WaitProgrammed) waits
// for that version even when felix renders the edit the same.
func VersionOnlyChange(a, b v3.Resource) bool {
	if a == nil || b == nil || a.GetResourceVersion() == b.GetResourceVersion() {
		return false
	}
	switch v3.KindOf(b) {
	case v3.KindNode, v3.KindWorkloadEndpoint:
	default:
		return false
	}
	ac, ok := a.DeepCopyObject().(v3.Resource)
	if !ok {
		return false
	}
	ac.SetResourceVersion(b.GetResourceVersion())
	return equality.Semantic.DeepEqual(ac, b)
}
