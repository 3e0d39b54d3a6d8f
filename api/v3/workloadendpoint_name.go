package v3

import "strings"

// ExpectedName is the WorkloadEndpoint name Calico derives from the
// spec's identifiers: node, orchestrator, then the pod (k8s), the
// container ID (cni), the orchestrator again (libnetwork) or the workload
// (any other orchestrator), then the endpoint; each part with its '-'
// doubled, joined by '-'. A part that is missing, or that starts or ends
// with '-', is reported as Calico reports it.
func (s *WorkloadEndpointSpec) ExpectedName() (string, ErrorList) {
	sp := Path("spec")
	type part struct{ field, v string }
	node, orch := part{"node", s.Node}, part{"orchestrator", s.Orchestrator}
	endpoint := part{"endpoint", s.Endpoint}
	var parts []part
	switch s.Orchestrator {
	case "k8s":
		parts = []part{node, orch, {"pod", s.Pod}, endpoint}
	case "cni":
		parts = []part{node, orch, {"containerID", s.ContainerID}, endpoint}
	case "libnetwork":
		parts = []part{node, orch, orch, endpoint}
	default:
		parts = []part{node, orch, {"workload", s.Workload}, endpoint}
	}
	var errs ErrorList
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		switch {
		case p.v == "":
			errs.Add(sp.Child(p.field), "field should be assigned: the endpoint's name is made from it")
			return "", errs
		case p.v[0] == '-':
			errs.Add(sp.Child(p.field), "field must not begin with a '-'")
		case p.v[len(p.v)-1] == '-':
			errs.Add(sp.Child(p.field), "field must not end with a '-'")
		}
		out = append(out, strings.ReplaceAll(p.v, "-", "--"))
	}
	if len(errs) > 0 {
		return "", errs
	}
	return strings.Join(out, "-"), nil
}

// validateName checks that the endpoint's name is the one its spec
// implies (Calico's clientv3 refuses any other on create and update).
func (w *WorkloadEndpoint) validateName() ErrorList {
	want, errs := w.Spec.ExpectedName()
	if len(errs) > 0 || w.Name == "" || w.Name == want {
		return errs
	}
	var out ErrorList
	out.Addf(Path("metadata").Child("name"), "the WorkloadEndpoint name does not match the primary identifiers assigned in the Spec: expected name %s", want)
	return out
}
