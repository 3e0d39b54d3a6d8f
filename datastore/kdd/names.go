package kdd

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"
)

// Names, labels and annotations Calico's Kubernetes datastore uses. They
// are part of the on-cluster format: a Tabby node reads what a Calico node
// wrote and the other way round.
const (
	orchestratorK8s = "k8s"

	// Labels Calico adds to every WorkloadEndpoint derived from a pod.
	labelNamespace      = "projectcalico.org/namespace"
	labelOrchestrator   = "projectcalico.org/orchestrator"
	labelServiceAccount = "projectcalico.org/serviceaccount"
	// nameLabel, behind the pcns./pcsa. prefix, lets selectors match a
	// namespace or service account by its exact name.
	nameLabel = "projectcalico.org/name"

	namespaceLabelPrefix            = "pcns."
	namespaceProfilePrefix          = "kns."
	serviceAccountLabelPrefix       = "pcsa."
	serviceAccountProfilePrefix     = "ksa."
	defaultAllowProfileName         = "projectcalico-default-allow"
	k8sNetworkPolicyNamePrefix      = "knp.default."
	k8sNetworkPolicyOrder           = float64(1000)
	annotationPodIP                 = "cni.projectcalico.org/podIP"
	annotationPodIPs                = "cni.projectcalico.org/podIPs"
	annotationAWSPodIPs             = "vpc.amazonaws.com/pod-ips"
	annotationContainerID           = "cni.projectcalico.org/containerID"
	annotationFloatingIPs           = "cni.projectcalico.org/floatingIPs"
	annotationAllowedSourcePrefixes = "cni.projectcalico.org/allowedSourcePrefixes"
	annotationNetworkStatus         = "k8s.v1.cni.cncf.io/network-status"

	// vethPrefix is the host-side interface prefix Felix and the CNI
	// plugin agree on (Calico's FELIX_INTERFACEPREFIX default).
	vethPrefix = "cali"
)

// WorkloadEndpointName returns Calico's name for the WorkloadEndpoint of a
// pod's interface: <node>-k8s-<pod>-<endpoint>, each part with its dashes
// doubled so the name can be split again. A part may not start or end
// with a dash (Kubernetes names never do).
func WorkloadEndpointName(node, pod, endpoint string) (string, error) {
	parts := []struct{ field, value string }{
		{"node", node}, {"orchestrator", orchestratorK8s}, {"pod", pod}, {"endpoint", endpoint},
	}
	out := make([]string, len(parts))
	for i, p := range parts {
		switch {
		case p.value == "":
			return "", fmt.Errorf("workload endpoint name: %s is empty", p.field)
		case p.value[0] == '-' || p.value[len(p.value)-1] == '-':
			return "", fmt.Errorf("workload endpoint name: %s %q may not start or end with '-'", p.field, p.value)
		}
		out[i] = strings.ReplaceAll(p.value, "-", "--")
	}
	return strings.Join(out, "-"), nil
}

// ParseWorkloadEndpointName splits a WorkloadEndpoint name made by
// WorkloadEndpointName. ok is false when the name is not a k8s one.
func ParseWorkloadEndpointName(name string) (node, pod, endpoint string, ok bool) {
	var parts []string
	start := 0
	for i := 1; i < len(name); i++ {
		if name[i] != '-' {
			continue
		}
		if i+1 < len(name) && name[i+1] == '-' {
			i++ // an escaped dash
			continue
		}
		parts = append(parts, strings.ReplaceAll(name[start:i], "--", "-"))
		start = i + 1
	}
	parts = append(parts, strings.ReplaceAll(name[start:], "--", "-"))
	if len(parts) != 4 || parts[1] != orchestratorK8s || parts[0] == "" || parts[2] == "" || parts[3] == "" {
		return "", "", "", false
	}
	return parts[0], parts[2], parts[3], true
}

// VethName is the host-side interface name of a pod's veth: "cali" and
// the first 11 hex digits of sha1("<namespace>.<pod>"), as Calico's CNI
// plugin names it.
func VethName(namespace, pod string) string {
	h := sha1.Sum([]byte(namespace + "." + pod))
	return vethPrefix + hex.EncodeToString(h[:])[:11]
}

// ConvertUID maps a UID to another one deterministically and reversibly
// (applying it twice gives the original). Calico gives objects derived
// from, or stored as, another Kubernetes object this UID rather than the
// source's own, so two objects never share a UID (which confuses the
// Kubernetes garbage collector). The version and variant bits of the UUID
// are kept; the bits of every other byte are reversed.
func ConvertUID(uid types.UID) (types.UID, error) {
	u, err := uuid.Parse(string(uid))
	if err != nil {
		return "", fmt.Errorf("UID %q is not a UUID: %w", uid, err)
	}
	for i := range u {
		if i == 6 || i == 8 { // version and variant bytes
			continue
		}
		u[i] = bits.Reverse8(u[i])
	}
	return types.UID(u.String()), nil
}
