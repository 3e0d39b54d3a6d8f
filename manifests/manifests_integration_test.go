//go:build integration

package manifests

import (
	"bytes"
	"context"
	"maps"

	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/staged"
	"github.com/tabbynet/tabby/internal/testservers"
	typhadaemon "github.com/tabbynet/tabby/typha/daemon"
)

const (
	nodeSA  = "calico-node"
	cniSA   = "calico-cni-plugin"
	kcSA    = "calico-kube-controllers"
	typhaSA = "calico-typha"
	tabbyNS = "kube-system"
)

// TestIntegrationManifestsDryRun: every object of both manifests is
// accepted by a real kube-apiserver (`kubectl apply --dry-run=server`),
// with the CRDs applied for real first.
func TestIntegrationManifestsDryRun(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	testservers.ApplyCRDs(t, restConfig(t, k), "crds")
	for _, name := range []string{"tabby.yaml", "tabby-etcd.yaml"} {
		t.Run(name, func(t *testing.T) {
			docs := documents(t, name)
			out := kubectl(t, k, "apply", "--dry-run=server", "-f", name)
			accepted := strings.Count(out, "(server dry run)")
			if accepted != len(docs) {
				t.Fatalf("%d of %d objects accepted:\n%s", accepted, len(docs), out)
			}
		})
	}
}

// access is one request a component makes, or must not be able to make.
type access struct {
	verb        string
	gvr         schema.GroupVersionResource
	subresource string
	namespace   string // "" = all namespaces / cluster-scoped
	name        string
}

func (a access) String() string {
	r := a.gvr.Resource
	if a.gvr.Group != "" {
		r += "." + a.gvr.Group
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.name != "" {
		r += " " + a.name
	}
	if a.namespace != "" {
		r += " -n " + a.namespace
	}
	return a.verb + " " + r
}

var (
	core = func(res string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: res}
	}
	pods     = core("pods")
	nodes    = core("nodes")
	nsRes    = core("namespaces")
	saRes    = core("serviceaccounts")
	secrets  = core("secrets")
	leases   = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	knp      = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	kcnp     = kdd.ClusterNetworkPolicyGVR
	readOnly = []string{"get", "list", "watch"}
)

func crd(kind string) schema.GroupVersionResource {
	gvr, ok := kdd.CRDResource(kind)
	if !ok {
		panic("no CRD stores kind " + kind)
	}
	return gvr
}

func each(verbs []string, gvrs ...schema.GroupVersionResource) []access {
	var out []access
	for _, g := range gvrs {
		for _, v := range verbs {
			out = append(out, access{verb: v, gvr: g})
		}
	}
	return out
}

// ipamUse is what Calico IPAM (package ipam) does on the Kubernetes
// datastore: reads pools, reservations, its configuration and the node,
// and reads and writes blocks, affinities and handles (assign, claim,
// release, GC).
func ipamUse() []access {
	out := each([]string{"list"}, crd(v3.KindIPPool), crd(v3.KindIPReservation))
	out = append(out, access{verb: "get", gvr: crd(v3.KindIPAMConfiguration), name: "default"})
	out = append(out, access{verb: "get", gvr: nodes})
	out = append(out, each([]string{"get", "list", "create", "update", "delete"},
		crd(v3.KindIPAMBlock), crd(v3.KindBlockAffinity), crd(v3.KindIPAMHandle))...)
	return out
}

// watched is what a syncer over kinds lists and watches on the Kubernetes
// datastore (datastore/kdd's sources of each kind).
func watched(t *testing.T, c *kdd.Client, kinds ...string) []access {
	t.Helper()
	var out []access
	for _, kind := range kinds {
		gvrs, err := c.Resources(kind)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, each(readOnly, gvrs...)...)
	}
	return out
}

// needsKDD derives, per ServiceAccount, what its component calls in
// Kubernetes datastore mode.
func needsKDD(t *testing.T, c *kdd.Client) map[string][]access {
	// calico-node: felix's (with EndpointSlices, and with flow logs on the
	// collector's staged policies) and confd's syncers, the Node written back
	// (kdd's Node update goes through nodes/status), what node/startup's
	// InitDatastore creates or updates (ClusterInformation, tiers, the
	// default pools, FelixConfiguration and BGPConfiguration; the default
	// IPAMConfiguration is only created), CalicoNodeStatus reports,
	// tunnel addresses from IPAM, BGP passwords from the named Secret,
	// and the CNI plugin's tokens.
	node := watched(t, c, slices.Concat(daemon.SyncKinds(c), staged.Kinds, confd.Kinds)...)
	node = append(node, access{verb: "update", gvr: nodes, subresource: "status"},
		access{verb: "patch", gvr: nodes, subresource: "status"}) // node/agent.MarkNetworkAvailable
	node = append(node, each([]string{"get", "create", "update"}, crd(v3.KindClusterInformation), crd(v3.KindTier),
		crd(v3.KindIPPool), crd(v3.KindFelixConfiguration), crd(v3.KindBGPConfiguration))...)
	node = append(node, access{verb: "create", gvr: crd(v3.KindIPAMConfiguration)})
	node = append(node, each([]string{"get", "list", "watch", "update"}, crd(v3.KindCalicoNodeStatus))...)
	node = append(node, ipamUse()...)
	node = append(node,
		access{verb: "get", gvr: secrets, namespace: tabbyNS, name: "bgp-secrets"},
		access{verb: "create", gvr: saRes, subresource: "token", namespace: tabbyNS, name: cniSA},
	)

	// The CNI plugin (cni-plugin/kubepods and calico-ipam): the pod and
	// its namespace read, the pod annotated through pods/status, and IPAM.
	cni := []access{
		{verb: "get", gvr: pods, namespace: "default", name: "any-pod"},
		{verb: "get", gvr: nsRes, name: "default"},
		{verb: "patch", gvr: pods, subresource: "status", namespace: "default", name: "any-pod"},
	}
	cni = append(cni, ipamUse()...)

	// kube-controllers: the node controller and IPAM GC (ipam.GC lists
	// handles, nodes, endpoints i.e. pods, blocks and affinities), its
	// configuration and the leader-election Lease.
	kc := watched(t, c, v3.KindNode, v3.KindWorkloadEndpoint)
	kc = append(kc, ipamUse()...)
	kc = append(kc, each([]string{"get", "list", "watch", "create", "update"}, crd(v3.KindKubeControllersConfiguration))...)
	kc = append(kc, access{verb: "update", gvr: crd(v3.KindKubeControllersConfiguration), subresource: "status"})
	kc = append(kc, leaseUse()...)

	// Typha: every stream's syncer lists and watches, nothing else.
	var typha []access
	for _, kinds := range typhadaemon.Streams(c) {
		typha = append(typha, watched(t, c, kinds...)...)
	}
	return map[string][]access{nodeSA: node, cniSA: cni, kcSA: kc, typhaSA: typha}
}

func leaseUse() []access {
	return []access{
		{verb: "create", gvr: leases, namespace: tabbyNS},
		{verb: "get", gvr: leases, namespace: tabbyNS, name: kcSA},
		{verb: "update", gvr: leases, namespace: tabbyNS, name: kcSA},
	}
}

// needsEtcd: in etcd mode the components keep their Calico data in etcd
// and read only Kubernetes objects from the API server.
func needsEtcd() map[string][]access {
	node := []access{
		{verb: "get", gvr: pods, namespace: "default", name: "any-pod"},
		{verb: "get", gvr: nodes, name: "any-node"},
		{verb: "get", gvr: nsRes, name: "default"},
		{verb: "patch", gvr: nodes, subresource: "status", name: "any-node"},
		{verb: "create", gvr: saRes, subresource: "token", namespace: tabbyNS, name: cniSA},
	}
	cni := []access{
		{verb: "get", gvr: pods, namespace: "default", name: "any-pod"},
		{verb: "get", gvr: nsRes, name: "default"},
	}
	// The policy (and ClusterNetworkPolicy), namespace, service-account,
	// workload-endpoint-label and node controllers mirror these into etcd.
	kc := each(readOnly, nodes, pods, nsRes, saRes, knp, kcnp)
	kc = append(kc, leaseUse()...)
	return map[string][]access{nodeSA: node, cniSA: cni, kcSA: kc}
}

// forbidden for every ServiceAccount of both manifests.
var forbiddenAll = []access{
	{verb: "get", gvr: secrets, namespace: "default", name: "anything"},
	{verb: "list", gvr: secrets},
	{verb: "watch", gvr: secrets},
	{verb: "list", gvr: secrets, namespace: tabbyNS},
	{verb: "get", gvr: secrets, namespace: tabbyNS, name: "calico-etcd-secrets"},
	{verb: "create", gvr: pods, namespace: "default"},
	{verb: "create", gvr: pods, namespace: tabbyNS},
	{verb: "delete", gvr: nodes, name: "any-node"},
	{verb: "delete", gvr: nodes},
	{verb: "patch", gvr: pods, namespace: "default", name: "any-pod"},
	{verb: "update", gvr: pods, namespace: "default", name: "any-pod"},
	{verb: "create", gvr: saRes, subresource: "token", namespace: tabbyNS, name: nodeSA},
	{verb: "create", gvr: saRes, subresource: "token", namespace: tabbyNS, name: kcSA},
	{verb: "create", gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}},
}

// TestIntegrationManifestRBAC applies each manifest's ServiceAccounts and
// RBAC to a fresh kube-apiserver and asks it (SubjectAccessReviews, as
// `kubectl auth can-i --as=system:serviceaccount:kube-system:<sa>`) that
// each ServiceAccount may make every request its component makes, and
// none of the forbidden ones (Secrets beyond the named one, creating
// pods, deleting Nodes, ...).
func TestIntegrationManifestRBAC(t *testing.T) {
	for _, name := range []string{"tabby.yaml", "tabby-etcd.yaml"} {
		t.Run(name, func(t *testing.T) {
			k := testservers.StartKubeAPIServer(t)
			rc := restConfig(t, k)
			rbac := filepath.Join(t.TempDir(), "rbac.yaml")
			if err := os.WriteFile(rbac, rbacOf(t, name), 0o600); err != nil {
				t.Fatal(err)
			}
			kubectl(t, k, "apply", "-f", rbac)

			var needs map[string][]access
			if name == "tabby.yaml" {
				c, err := kdd.New(kdd.Config{REST: rc})
				if err != nil {
					t.Fatal(err)
				}
				needs = needsKDD(t, c)
			} else {
				needs = needsEtcd()
			}
			checkNoGrantWithoutNeed(t, name, needs)
			kube := kubernetes.NewForConfigOrDie(rc)
			for _, sa := range slices.Sorted(maps.Keys(needs)) {
				t.Run(sa, func(t *testing.T) {
					if len(needs[sa]) == 0 {
						t.Fatal("no needs listed")
					}
					for _, a := range needs[sa] {
						if !allowed(t, kube, sa, a) {
							t.Errorf("%s cannot %s", sa, a)
						}
					}
					for _, a := range forbiddenAll {
						if allowed(t, kube, sa, a) {
							t.Errorf("%s can %s", sa, a)
						}
					}
				})
			}
			// The same answers through kubectl, as an operator would ask.
			if out, err := kubectlRun(k, "auth", "can-i", "list", "secrets", "--all-namespaces", "--as=system:serviceaccount:kube-system:"+nodeSA); err == nil {
				t.Errorf("kubectl auth can-i list secrets says yes for calico-node: %s", out)
			}
			if out, err := kubectlRun(k, "auth", "can-i", "create", "serviceaccounts/"+cniSA, "--subresource=token", "-n", tabbyNS, "--as=system:serviceaccount:kube-system:"+nodeSA); err != nil {
				t.Errorf("kubectl auth can-i create serviceaccounts/token calico-cni-plugin says no for calico-node: %v %s", err, out)
			}
		})
	}
}

// checkNoGrantWithoutNeed: least privilege the other way round: every
// (group, resource, verb) a ServiceAccount's roles grant is one its
// component was found to need.
func checkNoGrantWithoutNeed(t *testing.T, manifest string, needs map[string][]access) {
	t.Helper()
	type rule struct {
		APIGroups []string `json:"apiGroups"`
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	}
	type object struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Rules    []rule `json:"rules"`
		RoleRef  struct{ Kind, Name string }
		Subjects []struct{ Kind, Name, Namespace string }
	}
	roles := map[string][]rule{} // kind/name -> rules
	var bindings []object
	for _, doc := range documents(t, manifest) {
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatal(err)
		}
		switch o.Kind {
		case "ClusterRole", "Role":
			roles[o.Kind+"/"+o.Metadata.Name] = o.Rules
		case "ClusterRoleBinding", "RoleBinding":
			bindings = append(bindings, o)
		}
	}
	for _, b := range bindings {
		rules, ok := roles[b.RoleRef.Kind+"/"+b.RoleRef.Name]
		if !ok {
			t.Errorf("%s %s binds a role the manifest does not define: %s/%s", b.Kind, b.Metadata.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != tabbyNS {
				t.Errorf("%s %s binds %s %s/%s", b.Kind, b.Metadata.Name, s.Kind, s.Namespace, s.Name)
				continue
			}
			for _, r := range rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							if !needed(needs[s.Name], g, res, v) {
								t.Errorf("%s grants %s %s %s.%s, which no code of its component was found to need", b.RoleRef.Name, s.Name, v, res, g)
							}
						}
					}
				}
			}
		}
	}
}

func needed(needs []access, group, resource, verb string) bool {
	for _, a := range needs {
		r := a.gvr.Resource
		if a.subresource != "" {
			r += "/" + a.subresource
		}
		if a.gvr.Group == group && r == resource && a.verb == verb {
			return true
		}
	}
	return false
}

// allowed asks the API server whether the ServiceAccount may make a.
func allowed(t *testing.T, kube kubernetes.Interface, sa string, a access) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:" + tabbyNS + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + tabbyNS, "system:authenticated"},
		ResourceAttributes: &authzv1.ResourceAttributes{
			Namespace: a.namespace, Verb: a.verb, Group: a.gvr.Group, Version: a.gvr.Version,
			Resource: a.gvr.Resource, Subresource: a.subresource, Name: a.name,
		},
	}}
	got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview %s for %s: %v", a, sa, err)
	}
	return got.Status.Allowed
}

// rbacOf is the ServiceAccounts and RBAC objects of a manifest.
func rbacOf(t *testing.T, name string) []byte {
	t.Helper()
	var b bytes.Buffer
	n := 0
	for _, doc := range documents(t, name) {
		var obj struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			b.WriteString("---\n")
			b.Write(doc)
			b.WriteString("\n")
			n++
		}
	}
	if n == 0 {
		t.Fatalf("%s has no RBAC", name)
	}
	return b.Bytes()
}

func restConfig(t *testing.T, k *testservers.KubeAPIServer) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 1000, 1000
	return rc
}

func kubectlRun(k *testservers.KubeAPIServer, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(testservers.BinDir(), "kubectl"), append([]string{"--kubeconfig", k.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func kubectl(t *testing.T, k *testservers.KubeAPIServer, args ...string) string {
	t.Helper()
	out, err := kubectlRun(k, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}
