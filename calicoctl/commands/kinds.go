package commands

import (
	"fmt"
	"sort"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// shortNames are the abbreviations calicoctl users type.
var shortNames = map[string]string{
	"bgpconfig": v3.KindBGPConfiguration, "bgpconfigs": v3.KindBGPConfiguration,
	"bgpp": v3.KindBGPPeer, "bgpf": v3.KindBGPFilter,
	"felixconfig": v3.KindFelixConfiguration, "felixconfigs": v3.KindFelixConfiguration,
	"gnp": v3.KindGlobalNetworkPolicy, "gnps": v3.KindGlobalNetworkPolicy,
	"gns": v3.KindGlobalNetworkSet, "gnss": v3.KindGlobalNetworkSet,
	"hep": v3.KindHostEndpoint, "heps": v3.KindHostEndpoint,
	"ipp": v3.KindIPPool, "ipps": v3.KindIPPool, "pool": v3.KindIPPool, "pools": v3.KindIPPool,
	"ipr":        v3.KindIPReservation,
	"ipamconfig": v3.KindIPAMConfiguration, "ipamconfigs": v3.KindIPAMConfiguration,
	"kcc": v3.KindKubeControllersConfiguration, "kubecontrollersconfig": v3.KindKubeControllersConfiguration,
	"np": v3.KindNetworkPolicy, "nps": v3.KindNetworkPolicy, "policy": v3.KindNetworkPolicy, "policies": v3.KindNetworkPolicy,
	"netset": v3.KindNetworkSet, "netsets": v3.KindNetworkSet,
	"no":  v3.KindNode,
	"pro": v3.KindProfile, "pros": v3.KindProfile,
	"wep": v3.KindWorkloadEndpoint, "weps": v3.KindWorkloadEndpoint,
	"clusterinfo": v3.KindClusterInformation,
	"sgnp":        v3.KindStagedGlobalNetworkPolicy, "sgnps": v3.KindStagedGlobalNetworkPolicy,
	"snp": v3.KindStagedNetworkPolicy, "stagedpolicy": v3.KindStagedNetworkPolicy,
	"stagedpolicies": v3.KindStagedNetworkPolicy, "spol": v3.KindStagedNetworkPolicy, "spols": v3.KindStagedNetworkPolicy,
	"sknp": v3.KindStagedKubernetesNetworkPolicy, "stagedkubernetespolicy": v3.KindStagedKubernetesNetworkPolicy,
	"stagedkubernetespolicies": v3.KindStagedKubernetesNetworkPolicy,
	"skpol":                    v3.KindStagedKubernetesNetworkPolicy, "skpols": v3.KindStagedKubernetesNetworkPolicy,
}

// resolveKind turns what a user typed (any case; kind, plural or short
// name) into a registered kind.
func resolveKind(s string) (v3.KindInfo, error) {
	l := strings.ToLower(s)
	if k, ok := shortNames[l]; ok {
		info, _ := v3.LookupKind(k)
		return info, nil
	}
	for kind, t := range kindTables {
		for _, n := range t.names {
			if l == n {
				info, _ := v3.LookupKind(kind)
				return info, nil
			}
		}
	}
	for _, k := range v3.Kinds() {
		if l == strings.ToLower(k.Kind) || l == k.Plural {
			return k, nil
		}
	}
	var names []string
	for _, k := range v3.Kinds() {
		names = append(names, strings.ToLower(k.Kind))
	}
	sort.Strings(names)
	return v3.KindInfo{}, fmt.Errorf("unknown resource type %q: use one of %s", s, strings.Join(names, ", "))
}
