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
	"os"
	"slices"
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
// them, with manifests-no-sctp.yaml beside the base manifests: the same
// but for the SCTP servers, which serve nothing.
//
//go:embed base
var manifests embed.FS

// supported are the features Tabby implements: ClusterNetworkPolicy
// (standard) and named ports. Egress node peers are experimental, absent
// from the standard CRD Tabby ships (as Calico 3.32) and fail closed when
// converted: their tests skip themselves.
var supported = []suite.SupportedFeature{suite.SupportClusterNetworkPolicy, suite.SupportClusterNetworkPolicyNamedPorts}

// sctpOnly are the tests of SCTP alone, skipped where the kernel has no
// SCTP (CNP_NO_SCTP, set to the reason by hack/e2e-cnp.sh). The tests
// mixing protocols run without their SCTP pokes there (the build's patch
// of the suite's PokeServer).
var sctpOnly = []string{"CNPAdminTierIngressSCTP", "CNPAdminTierEgressSCTP", "CNPBaselineTierIngressSCTP", "CNPBaselineTierEgressSCTP"}

var debug = flag.Bool("cnp-debug", false, "the suite's debug logs")

// pokeTimeout is the suite's own TimeoutConfig.PokeTimeout (its default,
// 10 s, when 0): how long a poke may take to show the expected result.
// hack/e2e-cnp.sh raises it on VM nodes, where one `kubectl exec` of
// agnhost connect alone can take longer under TCG.
var pokeTimeout = flag.Duration("cnp-poke-timeout", 0, "the suite's PokeTimeout (0: its default, 10s)")

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
	o := suite.Options{Client: c, ClientSet: cs, KubeConfig: *cfg, Debug: *debug,
		CleanupBaseResources: true, SupportedFeatures: sets.New(supported...), FS: &manifests}
	o.TimeoutConfig.PokeTimeout = *pokeTimeout
	noSCTP := os.Getenv("CNP_NO_SCTP")
	if noSCTP != "" {
		o.BaseManifests = "base/manifests-no-sctp.yaml"
	}
	s := suite.New(o)
	s.Setup(t)
	for _, test := range tests.ConformanceTests {
		t.Run(test.ShortName, func(t *testing.T) {
			if noSCTP != "" && slices.Contains(sctpOnly, test.ShortName) {
				t.Skip(noSCTP)
			}
			test.Run(t, s)
		})
	}
}
