package v3

import (
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// Validate implements Resource. The name must be "default" (Calico's client
// refuses any other on create; kube-controllers reads only that one). The
// spec is checked against Calico's enums and ranges, and host endpoint
// templates against the client's rules: a unique generateName that is a
// valid name, valid CIDRs, labels and selector, and at least one of
// interfaceCIDRs and interfacePattern. A status written by kube-controllers
// is checked like a spec.
func (c *KubeControllersConfiguration) Validate() ErrorList {
	errs := validateMeta(&c.ObjectMeta, false)
	if c.Name != "" && c.Name != "default" {
		errs.Addf("metadata.name", "must be \"default\" (there is one KubeControllersConfiguration per cluster), got %q", c.Name)
	}
	errs.Extend(cfgValidateKCCSpec(Path("spec"), &c.Spec))
	if rc := c.Status.RunningConfig; rc != nil {
		errs.Extend(cfgValidateKCCSpec(Path("status").Child("runningConfig"), rc))
	}
	return errs
}

// cfgValidateKCCSpec validates a KubeControllersConfigurationSpec rooted at p.
func cfgValidateKCCSpec(p Path, s *KubeControllersConfigurationSpec) ErrorList {
	var errs ErrorList
	cfgCheckEnum(p.Child("logSeverityScreen"), s.LogSeverityScreen, &errs,
		"None", "Debug", "Info", "Warning", "Error", "Fatal", "Panic")
	cfgCheckEnum(p.Child("healthChecks"), s.HealthChecks, &errs, "Enabled", "Disabled")
	cfgCheckDuration(p.Child("etcdV3CompactionPeriod"), s.EtcdV3CompactionPeriod, &errs)
	cfgCheckInt(p.Child("prometheusMetricsPort"), s.PrometheusMetricsPort, 0, cfgMaxPort, &errs)
	if s.DebugProfilePort != nil {
		v := int(*s.DebugProfilePort)
		cfgCheckInt(p.Child("debugProfilePort"), &v, 0, cfgMaxPort, &errs)
	}

	cp := p.Child("controllers")
	c := &s.Controllers
	if n := c.Node; n != nil {
		np := cp.Child("node")
		cfgCheckDuration(np.Child("reconcilerPeriod"), n.ReconcilerPeriod, &errs)
		cfgCheckEnum(np.Child("syncLabels"), n.SyncLabels, &errs, "Enabled", "Disabled")
		cfgCheckDuration(np.Child("leakGracePeriod"), n.LeakGracePeriod, &errs)
		if h := n.HostEndpoint; h != nil {
			hp := np.Child("hostEndpoint")
			cfgCheckEnum(hp.Child("autoCreate"), h.AutoCreate, &errs, "Enabled", "Disabled")
			cfgCheckEnum(hp.Child("createDefaultHostEndpoint"), string(h.CreateDefaultHostEndpoint), &errs, "Enabled", "Disabled")
			cfgCheckTemplates(hp.Child("templates"), h.Templates, &errs)
		}
	}
	if c.Policy != nil {
		cfgCheckDuration(cp.Child("policy").Child("reconcilerPeriod"), c.Policy.ReconcilerPeriod, &errs)
	}
	if c.WorkloadEndpoint != nil {
		cfgCheckDuration(cp.Child("workloadEndpoint").Child("reconcilerPeriod"), c.WorkloadEndpoint.ReconcilerPeriod, &errs)
	}
	if c.ServiceAccount != nil {
		cfgCheckDuration(cp.Child("serviceAccount").Child("reconcilerPeriod"), c.ServiceAccount.ReconcilerPeriod, &errs)
	}
	if c.Namespace != nil {
		cfgCheckDuration(cp.Child("namespace").Child("reconcilerPeriod"), c.Namespace.ReconcilerPeriod, &errs)
	}
	if c.LoadBalancer != nil {
		cfgCheckEnum(cp.Child("loadBalancer").Child("assignIPs"), string(c.LoadBalancer.AssignIPs), &errs,
			string(AllServices), string(RequestedServicesOnly))
	}
	if c.Migration != nil {
		cfgCheckEnum(cp.Child("policyMigration").Child("enabled"), string(c.Migration.PolicyNameMigrator), &errs,
			string(ControllerEnabled), string(ControllerDisabled))
	}
	return errs
}

// cfgCheckTemplates applies Calico's host endpoint template rules.
func cfgCheckTemplates(p Path, ts []Template, errs *ErrorList) {
	seen := map[string]int{}
	for i, t := range ts {
		tp := p.Index(i)
		np := tp.Child("generateName")
		switch {
		case t.GenerateName == "":
			errs.Add(np, "is required")
		case len(t.GenerateName) > k8svalidation.DNS1123SubdomainMaxLength:
			errs.Addf(np, "is %d characters long; at most %d are allowed", len(t.GenerateName), k8svalidation.DNS1123SubdomainMaxLength)
		default:
			for _, msg := range k8svalidation.IsDNS1123Subdomain(t.GenerateName) {
				errs.Addf(np, "%q is not a valid name: %s", t.GenerateName, msg)
			}
			if j, dup := seen[t.GenerateName]; dup {
				errs.Addf(np, "%q is already used by templates[%d]; template names must be unique", t.GenerateName, j)
			} else {
				seen[t.GenerateName] = i
			}
		}
		if len(t.InterfaceCIDRs) == 0 && t.InterfacePattern == "" {
			errs.Add(tp, "must set interfaceCIDRs or interfacePattern (or both)")
		}
		for j, cidr := range t.InterfaceCIDRs {
			validateCIDR(tp.Child("interfaceCIDRs").Index(j), cidr, errs)
		}
		cfgCheckRegexp(tp.Child("interfacePattern"), t.InterfacePattern, errs)
		errs.Extend(validateLabels(tp.Child("labels"), t.Labels))
		errs.Extend(validateSelector(tp.Child("nodeSelector"), t.NodeSelector))
	}
}
