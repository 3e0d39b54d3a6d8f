package v3

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// KindKubernetesEndpointSlice names Kubernetes EndpointSlices as felix
// follows them for rules with a services match (as Calico's
// model.KindKubernetesEndpointSlice). It is no Calico resource: it is not
// registered among Kinds, cannot be written, and only the Kubernetes
// datastore yields it (Calico's felix follows EndpointSlices only there).
const KindKubernetesEndpointSlice = "KubernetesEndpointSlice"

// ServiceNameLabel is the label naming an EndpointSlice's Service.
const ServiceNameLabel = discoveryv1.LabelServiceName

// KubernetesEndpointSlice is one Kubernetes EndpointSlice as the
// datastore hands it to felix: the Kubernetes object with its TypeMeta
// kind set to KindKubernetesEndpointSlice.
// +kubebuilder:object:generate=false
type KubernetesEndpointSlice struct {
	discoveryv1.EndpointSlice
}

// NewKubernetesEndpointSlice wraps es (not copied) with its kind set.
func NewKubernetesEndpointSlice(es *discoveryv1.EndpointSlice) *KubernetesEndpointSlice {
	out := &KubernetesEndpointSlice{EndpointSlice: *es}
	out.APIVersion = discoveryv1.SchemeGroupVersion.String()
	out.Kind = KindKubernetesEndpointSlice
	return out
}

// Service is the "<namespace>/<name>" of the Service the slice belongs
// to (its kubernetes.io/service-name label).
func (s *KubernetesEndpointSlice) Service() string {
	return s.Namespace + "/" + s.Labels[ServiceNameLabel]
}

// DeepCopyObject implements runtime.Object.
func (s *KubernetesEndpointSlice) DeepCopyObject() runtime.Object {
	return &KubernetesEndpointSlice{EndpointSlice: *s.EndpointSlice.DeepCopy()}
}

// Default does nothing: the object is Kubernetes', as read.
func (s *KubernetesEndpointSlice) Default() {}

// Validate accepts every slice: an address that is not an IP (an FQDN
// slice) gives no set member, as in Calico.
func (s *KubernetesEndpointSlice) Validate() ErrorList { return nil }
