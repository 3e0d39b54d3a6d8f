// Package cnpconformance runs kubernetes-sigs/network-policy-api's
// conformance tests (sigs.k8s.io/network-policy-api/conformance, the
// version in go.mod) against the cluster of $KUBECONFIG, as the suite's own
// TestConformance does, with the features Tabby implements and the tests
// it cannot run here skipped by name, with the reason.
//
// Built only by hack/build-cnp-conformance.sh, which puts the suite's
// manifests (base/) beside this file.
package cnpconformance

import (
	"embed"
	"flag"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	api "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	"sigs.k8s.io/network-policy-api/conformance/tests"
	"sigs.k8s.io/network-policy-api/conformance/utils/suite"
)

// manifests are the suite's base/ manifests as the build script copied
// them (SCTP servers not started: see skipped).
//
//go:embed base
var manifests embed.FS

// supported are the features Tabby implements: ClusterNetworkPolicy
// (standard) and named ports. Egress node peers are experimental, absent
// from the standard CRD Tabby ships (as Calico 3.32) and fail closed when
// converted: their tests skip themselves.
var supported = []suite.SupportedFeature{suite.SupportClusterNetworkPolicy, suite.SupportClusterNetworkPolicyNamedPorts}

// skipped are the tests of supported features that cannot run here.
var skipped = map[string]string{
	"CNPAdminTierIngressSCTP":    noSCTP,
	"CNPAdminTierEgressSCTP":     noSCTP,
	"CNPBaselineTierIngressSCTP": noSCTP,
	"CNPBaselineTierEgressSCTP":  noSCTP,
}

const noSCTP = "the kernel of the machine running the cluster has no SCTP (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) is refused), so no SCTP server can listen"

var debug = flag.Bool("cnp-debug", false, "the suite's debug logs")

func TestConformance(t *testing.T) {
	cfg, err := config.GetConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Install(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	s := suite.New(suite.Options{Client: c, ClientSet: cs, KubeConfig: *cfg, Debug: *debug,
		CleanupBaseResources: true, SupportedFeatures: sets.New(supported...), FS: &manifests})
	s.Setup(t)
	for _, test := range tests.ConformanceTests {
		t.Run(test.ShortName, func(t *testing.T) {
			if why, ok := skipped[test.ShortName]; ok {
				t.Skip(why)
			}
			test.Run(t, s)
		})
	}
}
