package calc

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// remoteWEP is what the Engine keeps of a workload endpoint of another
// node: only the fields the calculation reads of one (loadWEP: name,
// namespace, labels, node, addresses, profiles, service account, ports),
// with the strings endpoints have in common interned and the label map
// shared by the endpoints with the same labels. At cluster scale these
// are nearly all the objects held; the decoded object is several times
// larger (metadata, identifiers, a label map and strings of its own).
type remoteWEP struct {
	name, namespace, node, serviceAccount string
	labels                                map[string]string // interned in the Engine's labelSets
	ipNetworks                            []string
	profiles                              []string
	ports                                 []v3.WorkloadEndpointPort
}

// compactRemote returns what the Engine keeps of w, an endpoint of
// another node.
func (e *Engine) compactRemote(w *v3.WorkloadEndpoint) *remoteWEP {
	r := &remoteWEP{
		name:           w.Name,
		namespace:      intern(w.Namespace),
		node:           intern(w.Spec.Node),
		serviceAccount: intern(w.Spec.ServiceAccountName),
		labels:         e.labelSets.intern(w.Labels),
		ipNetworks:     w.Spec.IPNetworks,
		ports:          w.Spec.Ports,
	}
	if len(w.Spec.Profiles) > 0 {
		r.profiles = make([]string, len(w.Spec.Profiles))
		for i, p := range w.Spec.Profiles {
			r.profiles[i] = intern(p)
		}
	}
	return r
}

// expand rebuilds the endpoint as the calculation reads it.
func (r *remoteWEP) expand() *v3.WorkloadEndpoint {
	return &v3.WorkloadEndpoint{
		ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: r.namespace, Labels: r.labels},
		Spec: v3.WorkloadEndpointSpec{
			Node: r.node, ServiceAccountName: r.serviceAccount,
			IPNetworks: r.ipNetworks, Profiles: r.profiles, Ports: r.ports,
		},
	}
}

// intern returns the canonical copy of s.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}
