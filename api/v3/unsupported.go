package v3

// Unsupported lists what of r passes Calico's validation but Tabby cannot
// enforce: a services match (felix does not watch Kubernetes Services and
// EndpointSlices) and an HTTP match (Tabby runs no L7 proxy). Writes
// refuse these (datastore.PrepareWrite, calicoctl create/apply/replace/
// validate) so that a policy is never stored meaning more than felix
// enforces. Validate keeps Calico's rules: felix still reads an object
// that got into the store another way (an older Tabby, a direct write to
// the CRD) and enforces it fail-closed, so that one bad rule never
// silently disappears with its policy.
func Unsupported(r Resource) ErrorList {
	var errs ErrorList
	sp := Path("spec")
	switch o := r.(type) {
	case *NetworkPolicy:
		unsupportedRules(sp.Child("ingress"), o.Spec.Ingress, &errs)
		unsupportedRules(sp.Child("egress"), o.Spec.Egress, &errs)
	case *GlobalNetworkPolicy:
		unsupportedRules(sp.Child("ingress"), o.Spec.Ingress, &errs)
		unsupportedRules(sp.Child("egress"), o.Spec.Egress, &errs)
	case *Profile:
		unsupportedRules(sp.Child("ingress"), o.Spec.Ingress, &errs)
		unsupportedRules(sp.Child("egress"), o.Spec.Egress, &errs)
	}
	return errs
}

func unsupportedRules(p Path, rules []Rule, errs *ErrorList) {
	for i := range rules {
		r := &rules[i]
		rp := p.Index(i)
		if r.HTTP != nil {
			errs.Add(rp.Child("http"), "HTTP matches are not supported by Tabby (they need an L7 proxy, which Tabby does not run): "+
				"remove the http match, or match on ports instead")
		}
		for _, side := range []struct {
			name string
			e    *EntityRule
		}{{"source", &r.Source}, {"destination", &r.Destination}} {
			if side.e.Services != nil {
				errs.Add(rp.Child(side.name).Child("services"), "services matches are not supported by Tabby yet "+
					"(felix does not follow a Service's endpoints): match the service's pods with a selector "+
					"(and namespaceSelector) and ports instead")
			}
		}
	}
}

// DefaultValidateForWrite fills defaults, validates (with Calico's
// write-time rules, WriteRules) and refuses what Tabby cannot enforce
// (Unsupported): what a write must pass.
func DefaultValidateForWrite(r Resource) error {
	r.Default()
	errs := r.Validate()
	errs.Extend(WriteRules(r))
	errs.Extend(Unsupported(r))
	return errs.Err()
}
