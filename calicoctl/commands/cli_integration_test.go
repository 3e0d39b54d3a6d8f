//go:build integration

package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// cliBackend is a real datastore the CLI talks to, configured the way a
// user would: through the environment.
type cliBackend struct {
	name string
	env  map[string]string
	// backends are the datastore implementations calicoctl is given.
	backends dsconfig.Backends
}

func etcdBackend(t *testing.T) cliBackend {
	e := testservers.StartEtcd(t)
	return cliBackend{name: "etcd", env: map[string]string{"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": e.Endpoint()}}
}

func (b cliBackend) run(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	return b.runVersion(t, stdin, "", args...)
}

// runVersion runs calicoctl as a client of the given version ("" for the
// default, an unversioned build).
func (b cliBackend) runVersion(t *testing.T, stdin, version string, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
		getenv:        func(k string) string { return b.env[k] },
		newClient:     b.backends.New,
		defaultConfig: "/nonexistent/calicoctl.cfg",
		version:       version,
	}
	code := run(a, args)
	return fmt.Sprintf("$ calicoctl %s\nexit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String()), code
}

// kind is the datastore kind, for transcripts that differ between them.
func (b cliBackend) kind() string {
	if strings.HasPrefix(b.name, "etcd") {
		return "etcd"
	}
	return b.name
}

// step is one calicoctl invocation of a scenario.
type step struct {
	args     []string
	stdin    string
	wantCode int
	// version is the client's version ("": an unversioned build).
	version string
	// setup, when set, runs instead of calicoctl (no transcript line):
	// what another component would write, e.g. calico-node's
	// ClusterInformation.
	setup func(t *testing.T, b cliBackend)
}

// seedClusterInfo writes ClusterInformation as calico-node does (users
// cannot: it is read-only to calicoctl, as in Calico).
func seedClusterInfo(version, clusterType string) func(t *testing.T, b cliBackend) {
	return func(t *testing.T, b cliBackend) {
		t.Helper()
		spec, err := dsconfig.Load("/nonexistent/calicoctl.cfg", false, func(k string) string { return b.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		c, err := b.backends.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ci := &v3.ClusterInformation{TypeMeta: metav1.TypeMeta{Kind: v3.KindClusterInformation, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v3.ClusterInformationSpec{CalicoVersion: version, ClusterType: clusterType}}
		ctx := context.Background()
		cur, err := c.Get(ctx, datastore.KeyOf(ci))
		switch {
		case errors.Is(err, datastore.ErrNotFound):
			_, err = c.Create(ctx, ci)
		case err == nil:
			ci.ResourceVersion = cur.GetResourceVersion()
			_, err = c.Update(ctx, ci)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func cliScenario(t *testing.T, b cliBackend, name string, steps []step) {
	t.Run(name, func(t *testing.T) {
		var transcript strings.Builder
		for _, s := range steps {
			if s.setup != nil {
				s.setup(t, b)
				continue
			}
			out, code := b.runVersion(t, s.stdin, s.version, s.args...)
			if code != s.wantCode {
				t.Errorf("calicoctl %s: exit %d, want %d\n%s", strings.Join(s.args, " "), code, s.wantCode, out)
			}
			transcript.WriteString(out)
			transcript.WriteString("\n")
		}
		checkGolden(t, name, transcript.String())
	})
}

func args(s string) []string { return strings.Fields(s) }

func TestCLIEtcd(t *testing.T) { cliSuite(t, etcdBackend(t)) }

func TestCLIKubernetes(t *testing.T) { cliSuite(t, kubeBackend(t)) }

func kubeBackend(t *testing.T) cliBackend {
	k := testservers.StartKubeAPIServer(t, testservers.WithAPIServerFlags(
		// calicoctl, like Calico's, writes namespaced resources into
		// namespaces the test never creates as Kubernetes objects.
		"--disable-admission-plugins=NamespaceLifecycle",
		"--shutdown-watch-termination-grace-period=1s",
	))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../../manifests/crds")
	return cliBackend{name: "kubernetes", env: map[string]string{"DATASTORE_TYPE": "kubernetes", "KUBECONFIG": k.Kubeconfig()},
		backends: dsconfig.Backends{Kubernetes: WithKubeconfigSettings(kdd.FromSpec)}}
}

// cliSuite runs the same scenarios, with the same golden transcripts,
// against either backend: the CLI must not be able to tell them apart.
func cliSuite(t *testing.T, b cliBackend) {
	td := "testdata/cli/"
	cliScenario(t, b, "pools", []step{
		// No ClusterInformation yet: Calico's version fails saying so.
		{args: args("version"), wantCode: 1},
		{args: args("create -f " + td + "pools.yaml")},
		{args: args("get ippools")},
		{args: args("get ippools -o wide")},
		{args: args("get ippool pool-a -o yaml")},
		{args: args("get ipp pool-b -o json")},
		{args: args("get pools -o name")},
		{args: args("get ippools --selector zone=='west'")},
		{args: args("create -f " + td + "pools.yaml"), wantCode: 1},
		{args: args("create -f " + td + "pools.yaml --skip-exists")},
		{args: args("apply -f " + td + "pools-changed.yaml")},
		{args: args("get ippool pool-a -o yaml")},
		{args: args("replace -f " + td + "later-invalid.yaml"), wantCode: 1},
		{args: args("create -f " + td + "later-invalid.yaml"), wantCode: 1},
		{args: args("get ippools")},
		{args: args("patch ippool pool-a -p {\"spec\":{\"disabled\":false,\"natOutgoing\":null}}")},
		{args: args("patch ippool pool-a -p {\"spec\":{\"blockSize\":40}}"), wantCode: 1},
		{args: args("patch ippool pool-a -p {\"spec\":{\"bogus\":1}}"), wantCode: 1},
		{args: args("label ippool pool-a team=net")},
		{args: args("label ippool pool-a team=db"), wantCode: 1},
		{args: args("label ippool pool-a team=db --overwrite")},
		{args: args("get ippool pool-a -o yaml")},
		{args: args("label ippool pool-a team --remove")},
		{args: args("delete ippool pool-b")},
		{args: args("delete ippool pool-b"), wantCode: 1},
		{args: args("delete ippool pool-b --skip-not-exists")},
		{args: args("delete -f " + td + "pools.yaml --skip-not-exists")},
		{args: args("get ippools")},
	})
	cliScenario(t, b, "namespaced", []step{
		{args: args("apply -f -"), stdin: mustRead(t, td+"policy.yaml")},
		{args: args("get networkpolicy")},
		{args: args("get networkpolicy -n prod")},
		{args: args("get networkpolicies -A -o wide")},
		{args: args("get np allow-db -n staging -o yaml")},
		{args: args("delete np allow-web -n prod")},
		{args: args("get np -A")},
	})
	cliScenario(t, b, "staged", []step{
		{args: args("create -f " + td + "staged.yaml")},
		{args: args("get sgnp")},
		{args: args("get stagedglobalnetworkpolicies -o wide")},
		{args: args("get snp -A")},
		{args: args("get stagednetworkpolicy allow-api -n shop -o yaml")},
		{args: args("get sknp -n shop -o wide")},
		{args: args("get caliconodestatus")},
		{args: args("get caliconodestatuses node1-status -o yaml")},
		{args: args("delete -f " + td + "staged.yaml")},
		{args: args("get sgnp")},
	})
	cliScenario(t, b, "bad-input", []step{
		{args: args("create -f " + td + "broken.yaml"), wantCode: 1},
		{args: args("create -f " + td + "unknown-kind.yaml"), wantCode: 1},
		{args: args("get frobnicators"), wantCode: 1},
		{args: args("get"), wantCode: 1},
		{args: args("get ippools -o xml"), wantCode: 1},
		{args: args("create -f " + td + "no-such-file.yaml"), wantCode: 1},
		{args: args("create"), wantCode: 1},
	})

	t.Run("missing-config", func(t *testing.T) {
		none := cliBackend{env: map[string]string{}}
		out, code := none.run(t, "", "get", "ippools")
		if code == 0 || !strings.Contains(out, "no datastore configured: set DATASTORE_TYPE") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
		if out, code := none.run(t, "", "version"); code != 0 || !strings.Contains(out, "Unable to detect installed Calico version") {
			t.Fatalf("version without a datastore: exit %d:\n%s", code, out)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		down := cliBackend{env: map[string]string{"DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://127.0.0.1:1"}}
		out, code := down.run(t, "", "get", "ippools")
		if code == 0 || !strings.Contains(out, "datastore unavailable at [http://127.0.0.1:1]") || !strings.Contains(out, "check the datastore is running") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	// Settings Tabby refuses: a warning naming what runs instead; a
	// security one (iptablesFilterAllowAction, bpfEnabled) refused without
	// --allow-unsupported, on every writing verb; one already stored does
	// not stop a patch of another field.
	cliScenario(t, b, "unsupported", []step{
		{args: args("apply -f " + td + "felix-insecure.yaml"), wantCode: 1},
		{args: args("create -f " + td + "felix-insecure.yaml"), wantCode: 1},
		{args: args("get felixconfiguration")},
		{args: args("create -f " + td + "felix-insecure.yaml --allow-unsupported")},
		{args: args("replace -f " + td + "felix-insecure.yaml"), wantCode: 1},
		{args: args("patch felixconfiguration default -p {\"spec\":{\"logSeverityScreen\":\"Debug\"}}")},
		{args: args("patch felixconfiguration default -p {\"spec\":{\"bpfEnabled\":true}}"), wantCode: 1},
		{args: args("patch felixconfiguration default -p {\"spec\":{\"nftablesMode\":\"Enabled\"}}")},
		{args: args("patch felixconfiguration default -p {\"spec\":{\"bpfEnabled\":true}} --allow-unsupported")},
		{args: args("get felixconfiguration default -o yaml --export")},
		{args: args("delete felixconfiguration default")},
	})
	t.Run("calico-words", func(t *testing.T) { testCalicoWords(t, b) })
	t.Run("corpus", func(t *testing.T) { testCorpusRoundTrip(t, b) })
	cliScenario(t, b, "version-initialised", []step{
		// ClusterInformation is read-only to users (Calico's refusal);
		// calico-node writes it.
		{args: args("apply -f -"), stdin: "apiVersion: projectcalico.org/v3\nkind: ClusterInformation\nmetadata: {name: default}\nspec: {calicoVersion: v3.30.0, clusterType: 'k8s,bgp'}\n", wantCode: 1},
		{args: args("delete clusterinformation default"), wantCode: 1},
		{setup: seedClusterInfo("v3.30.0", "k8s,bgp")},
		{args: args("version")},
	})
	cliScenario(t, b, "delete-tier", []step{
		{args: args("apply -f " + td + "tier-policies.yaml")},
		// The tier first: not empty yet, so it fails; the policies go.
		{args: args("delete -f " + td + "tier-policies.yaml"), wantCode: 1},
		{args: args("get tier security")},
		{args: args("get globalnetworkpolicies")},
		// The next run deletes the tier; the policies are gone already.
		{args: args("delete -f " + td + "tier-policies.yaml"), wantCode: 1},
		{args: args("get tier security"), wantCode: 1},
		{args: args("delete -f " + td + "tier-policies.yaml --skip-not-exists")},
		// Names: each is tried, each failure reported.
		{args: args("apply -f " + td + "pools.yaml")},
		{args: args("delete ippool no-such-pool pool-a other-missing"), wantCode: 1},
		{args: args("create -f " + td + "pools.yaml"), wantCode: 1},
		{args: args("delete -f " + td + "pools.yaml")},
	})
	t.Run("delete-cascade", func(t *testing.T) { testDeleteCascade(t, b) })
	t.Run("overlap", func(t *testing.T) { testPoolOverlap(t, b) })
	t.Run("ipam", func(t *testing.T) { testIPAM(t, b) })
	t.Run("ipam-calico-report", func(t *testing.T) { testIPAMCalicoReport(t, b) })
	t.Run("nodes-asn", func(t *testing.T) { testNodeASN(t, b) })
	t.Run("cluster-diags", func(t *testing.T) { testClusterDiags(t, b) })
	t.Run("policy-trace", func(t *testing.T) { testPolicyTrace(t, b) })
	ctlFlagScenarios(t, b)
}

func mustRead(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testCorpusRoundTrip applies every document of the API's valid corpus
// (Calico-style YAML for every kind) unchanged, reads each back and checks
// it equals the input with Calico's defaults applied; documents Tabby
// cannot enforce (v3.Unsupported; services matches on etcd,
// v3.ServicesMatches) must be refused.
func testCorpusRoundTrip(t *testing.T, b cliBackend) {
	files, _ := filepath.Glob("../../api/v3/testdata/valid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no corpus")
	}
	kinds := map[string]bool{}
	for _, f := range files {
		data := mustRead(t, f)
		docs, err := v3.DecodeYAMLDocuments([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			r := d.Resource
			kind := v3.KindOf(r)
			kinds[kind] = true
			t.Run(fmt.Sprintf("%s#%d", filepath.Base(f), d.Doc), func(t *testing.T) {
				js, _ := v3.EncodeJSON(r)
				if tier := policyTier(r); tier != "" {
					// A policy needs its tier (datastore.CheckWrite).
					tj := fmt.Sprintf(`{"apiVersion":"projectcalico.org/v3","kind":"Tier","metadata":{"name":%q},"spec":{"order":500}}`, tier)
					b.run(t, tj, "apply", "-f", "-")
					t.Cleanup(func() { b.run(t, "", "delete", "tier", tier) })
				}
				// The corpus holds Calico's security settings Tabby cannot
				// honour (wireguardEnabled, ...): written on request only.
				out, code := b.run(t, string(js), "apply", "-f", "-", "--allow-unsupported")
				if len(v3.Unsupported(r)) > 0 {
					// Valid Calico that Tabby cannot enforce (HTTP
					// matches): refused before any write, saying so
					// (also where the kind is read-only).
					if code == 0 || !strings.Contains(out, "not supported by Tabby") {
						t.Fatalf("apply of an unsupported %s: exit %d, want a not-supported error:\n%s", kind, code, out)
					}
					return
				}
				if b.name != "kubernetes" && len(v3.ServicesMatches(r)) > 0 {
					// felix follows Services only on the Kubernetes
					// datastore: etcd refuses services matches, saying so
					// (on Kubernetes they apply and round-trip).
					if code == 0 || !strings.Contains(out, "services matches need the Kubernetes datastore") {
						t.Fatalf("apply of a services match on etcd: exit %d, want a refusal:\n%s", code, out)
					}
					return
				}
				if c, ok := r.(*v3.IPAMConfiguration); ok && b.name == "kubernetes" && c.Spec.IPCooldownSeconds != 0 {
					// Calico v3.32's ipamconfigs CRD has no such field.
					if code == 0 || !strings.Contains(out, "ipCooldownSeconds") {
						t.Fatalf("apply of ipCooldownSeconds in Kubernetes mode: exit %d, want a refusal naming it:\n%s", code, out)
					}
					return
				}
				if err := v3.CheckUserWrite(kind, "apply"); err != nil {
					// Read-only to users (ClusterInformation): Calico's
					// refusal, nothing written.
					if code == 0 || !strings.Contains(out, err.Error()) {
						t.Fatalf("apply of a read-only %s: exit %d, want %q:\n%s", kind, code, err, out)
					}
					return
				}
				if b.name == "kubernetes" && derivedInKubernetesMode(r) {
					// Derived from native Kubernetes objects: Calico refuses
					// these writes in this mode, and so does Tabby.
					if code == 0 || !strings.Contains(out, "read-only") {
						t.Fatalf("apply of a %s in Kubernetes mode: exit %d, want a read-only error:\n%s", kind, code, out)
					}
					return
				}
				if code != 0 {
					t.Fatalf("apply failed:\n%s", out)
				}
				getArgs := []string{"get", kind, r.GetName(), "-o", "yaml"}
				if r.GetNamespace() != "" {
					getArgs = append(getArgs, "-n", r.GetNamespace())
				}
				out, code = b.run(t, "", getArgs...)
				if code != 0 {
					t.Fatalf("get failed:\n%s", out)
				}
				// Drop the "$ calicoctl ..." and "exit 0" lines.
				body := strings.SplitN(out, "\n", 3)[2]
				back, err := v3.DecodeOne([]byte(body))
				if err != nil {
					t.Fatalf("reading back: %v\n%s", err, body)
				}
				want := r.DeepCopyObject().(v3.Resource)
				want.Default()
				if b.name == "kubernetes" {
					dropStatusCalicoCRDLacks(want)
				}
				for _, o := range []v3.Resource{want, back} {
					o.SetResourceVersion("")
					o.SetUID("")
					o.SetCreationTimestamp(zeroTime)
				}
				if d := cmp.Diff(want, back); d != "" {
					t.Errorf("read back differs from what was applied (-want +got):\n%s", d)
				}
				delArgs := []string{"delete", kind, r.GetName()}
				if r.GetNamespace() != "" {
					delArgs = append(delArgs, "-n", r.GetNamespace())
				}
				out, code = b.run(t, "", delArgs...)
				if builtInTier(r) {
					// Protected, as in Calico: never deleted.
					if code == 0 || !strings.Contains(out, "Cannot delete "+r.GetName()+" tier") {
						t.Fatalf("delete of the built-in tier %s: exit %d, want refused:\n%s", r.GetName(), code, out)
					}
					return
				}
				if code != 0 {
					t.Fatalf("delete failed:\n%s", out)
				}
			})
		}
	}
	for _, k := range v3.Kinds() {
		if !kinds[k.Kind] {
			t.Errorf("corpus has no %s", k.Kind)
		}
	}
}

// policyTier is the tier a policy of the corpus names, when it is not a
// built-in one ("" otherwise).
func policyTier(r v3.Resource) string {
	var tier string
	switch p := r.(type) {
	case *v3.NetworkPolicy:
		tier = p.Spec.Tier
	case *v3.GlobalNetworkPolicy:
		tier = p.Spec.Tier
	}
	for _, t := range v3.DefaultTiers() {
		if t.Name == tier {
			return ""
		}
	}
	return tier
}

// builtInTier reports whether r is one of Calico's protected tiers.
func builtInTier(r v3.Resource) bool {
	if v3.KindOf(r) != v3.KindTier {
		return false
	}
	for _, t := range v3.DefaultTiers() {
		if t.Name == r.GetName() {
			return true
		}
	}
	return false
}

// derivedInKubernetesMode reports whether r is, in the Kubernetes
// datastore, derived from a native object rather than stored.
func derivedInKubernetesMode(r v3.Resource) bool {
	switch v3.KindOf(r) {
	case v3.KindWorkloadEndpoint, v3.KindNode:
		return true
	case v3.KindNetworkPolicy:
		return strings.HasPrefix(r.GetName(), "knp.default.")
	case v3.KindProfile:
		// Calico's CRD set has no profiles CRD: every profile is derived.
		return true
	}
	return false
}

// dropStatusCalicoCRDLacks clears the status of the kinds whose Calico CRD
// has none: the Kubernetes datastore does not store it (the API server
// prunes it on a Calico cluster).
func dropStatusCalicoCRDLacks(r v3.Resource) {
	switch o := r.(type) {
	case *v3.IPPool:
		o.Status = nil
	case *v3.NetworkPolicy:
		o.Status = nil
	case *v3.Tier:
		o.Status = v3.TierStatus{}
	}
}
