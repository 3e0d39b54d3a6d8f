package manifests

import (
	"slices"
	"sort"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// calicoCRDs is the crd.projectcalico.org CRD set of Calico v3.32
// (libcalico-go/config/crd): no nodes, profiles or workloadendpoints (Calico
// derives those from Kubernetes objects), and IPAMConfiguration stored as
// ipamconfigs.
var calicoCRDs = []string{
	"bgpconfigurations", "bgpfilters", "bgppeers", "blockaffinities", "caliconodestatuses",
	"clusterinformations", "felixconfigurations", "globalnetworkpolicies", "globalnetworksets",
	"hostendpoints", "ipamblocks", "ipamconfigs", "ipamhandles", "ippools", "ipreservations",
	"kubecontrollersconfigurations", "networkpolicies", "networksets", "stagedglobalnetworkpolicies",
	"stagedkubernetesnetworkpolicies", "stagednetworkpolicies", "tiers",
}

// TestCRDSetIsCalicos: manifests/crds holds exactly Calico's CRDs, and the
// fields whose stored form differs from the v3 API types have Calico's
// names and types (written from Calico's CRDs, field by field).
func TestCRDSetIsCalicos(t *testing.T) {
	crds := map[string]apiextv1.CustomResourceDefinition{}
	var got []string
	for name, data := range readDir(t, "crds") {
		if name == cnpCRDFile {
			continue // Kubernetes' own (TestClusterNetworkPolicyCRD)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if crd.Spec.Group != "crd.projectcalico.org" || crd.Name != crd.Spec.Names.Plural+".crd.projectcalico.org" {
			t.Errorf("%s: CRD %s in group %s", name, crd.Name, crd.Spec.Group)
		}
		crds[crd.Spec.Names.Plural] = crd
		got = append(got, crd.Spec.Names.Plural)
	}
	sort.Strings(got)
	if !slices.Equal(got, calicoCRDs) {
		t.Fatalf("CRD set:\n got %v\nwant %v", got, calicoCRDs)
	}

	schema := func(plural string, path ...string) *apiextv1.JSONSchemaProps {
		t.Helper()
		s := crds[plural].Spec.Versions[0].Schema.OpenAPIV3Schema
		for _, p := range path {
			if p == "[]" {
				s = s.Items.Schema
				continue
			}
			next, ok := s.Properties[p]
			if !ok {
				t.Errorf("%s: no field %s", plural, strings.Join(path, "."))
				return &apiextv1.JSONSchemaProps{}
			}
			s = &next
		}
		return s
	}
	for _, c := range []struct {
		plural string
		path   string
		typ    string
	}{
		{"blockaffinities", "spec.deleted", "string"},
		{"blockaffinities", "spec.state", "string"},
		{"blockaffinities", "spec.node", "string"},
		{"blockaffinities", "spec.cidr", "string"},
		{"blockaffinities", "spec.type", "string"},
		{"ipamconfigs", "spec.strictAffinity", "boolean"},
		{"ipamconfigs", "spec.autoAllocateBlocks", "boolean"},
		{"ipamconfigs", "spec.maxBlocksPerHost", "integer"},
		{"ipamconfigs", "spec.kubeVirtVMAddressPersistence", "string"},
		{"ipamhandles", "spec.handleID", "string"},
		{"ipamhandles", "spec.block", "object"},
		{"ipamhandles", "spec.deleted", "boolean"},
		{"ipamblocks", "spec.cidr", "string"},
		{"ipamblocks", "spec.affinity", "string"},
		{"ipamblocks", "spec.allocations", "array"},
		{"ipamblocks", "spec.unallocated", "array"},
		{"ipamblocks", "spec.attributes.[].handle_id", "string"},
		{"ipamblocks", "spec.attributes.[].secondary", "object"},
		{"ipamblocks", "spec.attributes.[].alternateOwnerAttrs", "object"},
		{"ipamblocks", "spec.deleted", "boolean"},
		{"ipamblocks", "spec.strictAffinity", "boolean"},
		{"ipamblocks", "spec.sequenceNumber", "integer"},
		{"ipamblocks", "spec.sequenceNumberForAllocation", "object"},
		{"bgppeers", "spec.asNumber", "integer"},
		{"bgpconfigurations", "spec.asNumber", "integer"},
	} {
		if s := schema(c.plural, strings.Split(c.path, ".")...); s.Type != c.typ {
			t.Errorf("%s %s: type %q, want %q (Calico's)", c.plural, c.path, s.Type, c.typ)
		}
	}
	for plural, want := range map[string][]string{
		"blockaffinities": {"cidr", "deleted", "node", "state"},
		"ipamconfigs":     {"autoAllocateBlocks", "strictAffinity"},
		"ipamhandles":     {"block", "handleID"},
	} {
		req := slices.Clone(schema(plural, "spec").Required)
		sort.Strings(req)
		for _, w := range want {
			if !slices.Contains(req, w) {
				t.Errorf("%s: spec.%s not required (Calico requires %v; got %v)", plural, w, want, req)
			}
		}
	}
	if crds["ipamconfigs"].Spec.Names.Kind != "IPAMConfig" || crds["ipamconfigs"].Spec.Scope != apiextv1.ClusterScoped {
		t.Errorf("ipamconfigs: kind %s scope %s, want IPAMConfig Cluster", crds["ipamconfigs"].Spec.Names.Kind, crds["ipamconfigs"].Spec.Scope)
	}
	// Only two of Calico's CRDs have a status, one of them as a subresource.
	for plural, crd := range crds {
		v := crd.Spec.Versions[0]
		_, hasStatus := v.Schema.OpenAPIV3Schema.Properties["status"]
		wantStatus := plural == "caliconodestatuses" || plural == "kubecontrollersconfigurations"
		if hasStatus != wantStatus {
			t.Errorf("%s: has status %v, Calico's %v", plural, hasStatus, wantStatus)
		}
		hasSub := v.Subresources != nil && v.Subresources.Status != nil
		if hasSub != (plural == "kubecontrollersconfigurations") {
			t.Errorf("%s: status subresource %v, Calico's %v", plural, hasSub, !hasSub)
		}
	}
}
