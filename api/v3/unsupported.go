package v3

// Unsupported lists what of r passes Calico's validation but Tabby cannot
// enforce: an HTTP match (Tabby runs no L7 proxy). Writes refuse it
// (datastore.PrepareWrite, calicoctl create/apply/replace/validate) so
// that a policy is never stored meaning more than felix enforces.
// Validate keeps Calico's rules: felix still reads an object that got
// into the store another way (an older Tabby, a direct write to the CRD)
// and enforces it fail-closed, so that one bad rule never silently
// disappears with its policy. (Services matches are enforced where felix
// follows Services: see ServicesMatches.)
func Unsupported(r Resource) ErrorList {
	var errs ErrorList
	eachRule(r, func(rp Path, rule *Rule) {
		if rule.HTTP != nil {
			errs.Add(rp.Child("http"), "HTTP matches are not supported by Tabby (they need an L7 proxy, which Tabby does not run): "+
				"remove the http match, or match on ports instead")
		}
	})
	return errs
}

// ServicesMatches lists r's services matches as errors saying that they
// need the Kubernetes datastore: felix follows Kubernetes Services (their
// EndpointSlices) only there, as Calico's felix does. The etcd datastore
// refuses them at write, where Calico's would store a rule that selects
// nothing (a Deny that denies nothing); one stored anyway fails closed.
func ServicesMatches(r Resource) ErrorList {
	var errs ErrorList
	eachRule(r, func(rp Path, rule *Rule) {
		for _, side := range []struct {
			name string
			e    *EntityRule
		}{{"source", &rule.Source}, {"destination", &rule.Destination}} {
			if side.e.Services != nil {
				errs.Add(rp.Child(side.name).Child("services"), "services matches need the Kubernetes datastore "+
					"(felix follows a Service's EndpointSlices only there, as Calico's): match the service's pods with a selector "+
					"(and namespaceSelector) and ports instead")
			}
		}
	})
	return errs
}

// eachRule calls f with every policy or profile rule of r and its path.
func eachRule(r Resource, f func(Path, *Rule)) {
	sp := Path("spec")
	var in, out []Rule
	switch o := r.(type) {
	case *NetworkPolicy:
		in, out = o.Spec.Ingress, o.Spec.Egress
	case *GlobalNetworkPolicy:
		in, out = o.Spec.Ingress, o.Spec.Egress
	case *Profile:
		in, out = o.Spec.Ingress, o.Spec.Egress
	}
	for i := range in {
		f(sp.Child("ingress").Index(i), &in[i])
	}
	for i := range out {
		f(sp.Child("egress").Index(i), &out[i])
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
