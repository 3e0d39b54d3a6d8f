package kdd

import "k8s.io/apimachinery/pkg/runtime/schema"

// Resources returns the Kubernetes resources the client reads to serve a
// v3 kind (its CRD, or the native resources Calico derives it from, e.g.
// pods for WorkloadEndpoint): what a component that lists and watches the
// kind must be allowed to list and watch. Manifests' RBAC is checked
// against it.
func (c *Client) Resources(kind string) ([]schema.GroupVersionResource, error) {
	kb, err := c.backend(kind)
	if err != nil {
		return nil, err
	}
	out := make([]schema.GroupVersionResource, 0, len(kb.sources))
	for _, s := range kb.sources {
		out = append(out, s.gvr)
	}
	return out, nil
}
