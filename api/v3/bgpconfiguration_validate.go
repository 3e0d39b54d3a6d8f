package v3

import "strings"

// netLogSeverities are the accepted logSeverityScreen values. Calico's CRD
// matches them case-insensitively.
var netLogSeverities = []string{"Trace", "Debug", "Info", "Warning", "Error", "Fatal"}

// validate checks a BGPConfigurationSpec as Calico's v3 validator and
// clientv3 do. isDefault says whether this is the cluster-wide object.
func (s *BGPConfigurationSpec) validate(p Path, isDefault bool) ErrorList {
	var errs ErrorList

	if s.LogSeverityScreen != "" {
		ok := false
		for _, l := range netLogSeverities {
			ok = ok || strings.EqualFold(l, s.LogSeverityScreen)
		}
		if !ok {
			errs.Addf(p.Child("logSeverityScreen"), "%q is not one of %s", s.LogSeverityScreen, strings.Join(netLogSeverities, ", "))
		}
	}

	// Fields Calico allows only on the cluster-wide object.
	if !isDefault {
		only := func(field string, set bool) {
			if set {
				errs.Addf(p.Child(field), "can only be set on the BGPConfiguration named \"default\"")
			}
		}
		only("nodeToNodeMeshEnabled", s.NodeToNodeMeshEnabled != nil)
		only("asNumber", s.ASNumber != nil)
		only("serviceLoadBalancerIPs", len(s.ServiceLoadBalancerIPs) > 0)
		only("serviceExternalIPs", len(s.ServiceExternalIPs) > 0)
		only("serviceClusterIPs", len(s.ServiceClusterIPs) > 0)
	}

	for i, b := range s.ServiceLoadBalancerIPs {
		netCheckServiceBlock(p.Child("serviceLoadBalancerIPs").Index(i).Child("cidr"), b.CIDR, &errs)
	}
	for i, b := range s.ServiceExternalIPs {
		netCheckServiceBlock(p.Child("serviceExternalIPs").Index(i).Child("cidr"), b.CIDR, &errs)
	}
	for i, b := range s.ServiceClusterIPs {
		netCheckServiceBlock(p.Child("serviceClusterIPs").Index(i).Child("cidr"), b.CIDR, &errs)
	}

	// Communities: named, well-formed, and used by some prefix advertisement.
	names := map[string]bool{}
	for i, c := range s.Communities {
		cp := p.Child("communities").Index(i)
		if c.Name == "" {
			errs.Add(cp.Child("name"), "is required")
		} else {
			netCheckResourceName(cp.Child("name"), c.Name, &errs)
			if names[c.Name] {
				errs.Addf(cp.Child("name"), "%q is defined more than once", c.Name)
			}
			names[c.Name] = true
		}
		if c.Value == "" {
			errs.Add(cp.Child("value"), "is required: use aa:nn or aa:nn:mm")
		} else if err := netCheckCommunity(c.Value); err != nil {
			errs.Add(cp.Child("value"), err.Error())
		}
	}
	if len(s.Communities) > 0 && len(s.PrefixAdvertisements) == 0 {
		errs.Add(p.Child("communities"), "communities are defined but no prefixAdvertisements use them")
	}
	for i, pa := range s.PrefixAdvertisements {
		pp := p.Child("prefixAdvertisements").Index(i)
		if pa.CIDR == "" {
			errs.Add(pp.Child("cidr"), "is required")
		} else {
			netStrictNet(pp.Child("cidr"), pa.CIDR, 0, &errs)
		}
		if len(pa.Communities) == 0 {
			errs.Add(pp.Child("communities"), "is required: list community names or values")
		}
		for j, v := range pa.Communities {
			if names[v] {
				continue
			}
			if err := netCheckCommunity(v); err != nil {
				errs.Addf(pp.Child("communities").Index(j), "%q is neither a community defined in spec.communities nor a value aa:nn or aa:nn:mm", v)
			}
		}
	}

	// The node mesh's own settings need the mesh.
	meshOff := s.NodeToNodeMeshEnabled != nil && !*s.NodeToNodeMeshEnabled
	if s.NodeMeshPassword != nil && meshOff {
		errs.Add(p.Child("nodeMeshPassword"), "cannot be set when nodeToNodeMeshEnabled is false")
	}
	if s.NodeMeshMaxRestartTime != nil && meshOff {
		errs.Add(p.Child("nodeMeshMaxRestartTime"), "cannot be set when nodeToNodeMeshEnabled is false")
	}
	netCheckBGPPassword(p.Child("nodeMeshPassword"), s.NodeMeshPassword, &errs)
	netCheckDuration(p.Child("nodeMeshMaxRestartTime"), s.NodeMeshMaxRestartTime, &errs)

	if s.BindMode != nil {
		if *s.BindMode == "" {
			errs.Add(p.Child("bindMode"), "is empty: use None or NodeIP")
		}
		oneOf(p.Child("bindMode"), string(*s.BindMode), &errs, string(BindModeNone), string(BindModeNodeIP))
	}
	for i, iface := range s.IgnoredInterfaces {
		if iface == "*" || !netCheckIfaceName(iface) {
			errs.Addf(p.Child("ignoredInterfaces").Index(i), "%q is not an interface name or glob (1-15 of a-z A-Z 0-9 _ . - *, and not just \"*\")", iface)
		}
	}
	if s.LocalWorkloadPeeringIPV4 != "" {
		netCheckIP(p.Child("localWorkloadPeeringIPV4"), s.LocalWorkloadPeeringIPV4, 4, &errs)
	}
	if s.LocalWorkloadPeeringIPV6 != "" {
		netCheckIP(p.Child("localWorkloadPeeringIPV6"), s.LocalWorkloadPeeringIPV6, 6, &errs)
	}
	if s.ProgramClusterRoutes != nil {
		if *s.ProgramClusterRoutes == "" {
			errs.Add(p.Child("programClusterRoutes"), "is empty: use Enabled or Disabled")
		}
		oneOf(p.Child("programClusterRoutes"), *s.ProgramClusterRoutes, &errs, ProgramClusterRoutesEnabled, ProgramClusterRoutesDisabled)
	}
	if a := s.ServiceLoadBalancerAggregation; a != nil {
		if *a == "" {
			errs.Add(p.Child("serviceLoadBalancerAggregation"), "is empty: use Enabled or Disabled")
		}
		oneOf(p.Child("serviceLoadBalancerAggregation"), string(*a), &errs, string(ServiceLoadBalancerAggregationEnabled), string(ServiceLoadBalancerAggregationDisabled))
	}
	if v := s.IPv4NormalRoutePriority; v != nil {
		netCheckRange(p.Child("ipv4NormalRoutePriority"), int64(*v), 1, 2147483646, &errs)
	}
	if v := s.IPv6NormalRoutePriority; v != nil {
		netCheckRange(p.Child("ipv6NormalRoutePriority"), int64(*v), 1, 2147483646, &errs)
	}
	return errs
}

// netCheckServiceBlock checks a service CIDR: required and strictly masked.
func netCheckServiceBlock(p Path, cidr string, errs *ErrorList) {
	if cidr == "" {
		errs.Add(p, "is required")
		return
	}
	netStrictNet(p, cidr, 0, errs)
}
