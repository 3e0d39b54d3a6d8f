//go:build privileged

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The ClusterNetworkPolicy and services-match cases of issue 31 on a
// real cluster, through `tabby-lab cluster apply/delete/probe` (policies
// as YAML, every node's felix programmed before apply returns, real TCP
// connections between pods on three nodes). Pods: prod (team=a) web
// (node-1; 8080 named http, 9090; in Service websvc) and db (node-2; 8080,
// 9090); dev (team=b) client (node-3) and other (node-1), 8080 each.

// policyPods creates the cases' namespaces and pods.
func (c *Cluster) policyPods(t *testing.T, ctx context.Context) {
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	for ns, team := range map[string]string{"prod": "a", "dev": "b"} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"team": team}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	web := twoPortPod(agnPod("prod", "web", "node-1", map[string]string{"app": "web", "svc": "web"}))
	web.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	createPods(t, ctx, kc, web, twoPortPod(agnPod("prod", "db", "node-2", map[string]string{"app": "db"})),
		agnPod("dev", "client", "node-3", map[string]string{"app": "client"}),
		agnPod("dev", "other", "node-1", map[string]string{"app": "other"}))
}

// twoPortPod adds a second netexec (HTTP on 9090) to an agnPod.
func twoPortPod(p *corev1.Pod) *corev1.Pod {
	second := p.Spec.Containers[0]
	second.Name, second.Args = "agnhost-9090", []string{"netexec", "--http-port=9090", "--udp-port=-1"}
	p.Spec.Containers = append(p.Spec.Containers, second)
	return p
}

// fates are connection verdicts: "from>to:port" (pods as ns/name) ->
// allowed.
type fates map[string]bool

// probeFates runs `tabby-lab cluster probe` over prod and dev on each port
// and returns every pair's verdict.
func (c *Cluster) probeFates(t *testing.T, ctx context.Context) fates {
	t.Helper()
	got := fates{}
	for _, port := range []string{"8080", "9090"} {
		out, err := c.tabbyLab(ctx, "probe", "-n", "prod,dev", "--port", port, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var res []struct {
			From, To string
			Allowed  bool
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("probe output: %v\n%s", err, out)
		}
		for _, r := range res {
			got[r.From+">"+r.To+":"+port] = r.Allowed
		}
	}
	return got
}

// mismatches lists the verdicts of want that got differs on.
func (f fates) mismatches(want fates) []string {
	var bad []string
	for k, w := range want {
		if g, ok := f[k]; !ok || g != w {
			bad = append(bad, fmt.Sprintf("%s allowed=%v (probed: %v), want %v", k, g, ok, w))
		}
	}
	return bad
}

// expectFates probes until every verdict of want holds (up to within,
// for changes felix follows on its own, such as a Service's endpoints),
// else fails the step.
func (c *Cluster) expectFates(t *testing.T, ctx context.Context, step string, within time.Duration, want fates) {
	t.Helper()
	start := time.Now()
	for {
		bad := c.probeFates(t, ctx).mismatches(want)
		if len(bad) == 0 {
			t.Logf("%s: %d verdicts as expected (%s)", step, len(want), time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Since(start) > within {
			t.Errorf("%s:\n  %s", step, strings.Join(bad, "\n  "))
			return
		}
		time.Sleep(time.Second)
	}
}

// applyYAML runs `tabby-lab cluster apply` (del: delete) on the documents.
func (c *Cluster) applyYAML(t *testing.T, ctx context.Context, del bool, docs string) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "docs.yaml")
	if err := os.WriteFile(f, []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	verb := "apply"
	if del {
		verb = "delete"
	}
	return c.tabbyLab(ctx, verb, "-f", f)
}

func (c *Cluster) mustApply(t *testing.T, ctx context.Context, del bool, docs string) {
	t.Helper()
	out, err := c.applyYAML(t, ctx, del, docs)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(out))
}

// cnp is a ClusterNetworkPolicy on prod's pods with one ingress rule.
func cnp(name, tier string, prio int, rule string) string {
	return fmt.Sprintf(`apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: %s}
spec:
  tier: %s
  priority: %d
  subject: {namespaces: {matchLabels: {team: a}}}
  ingress:
  - %s
`, name, tier, prio, rule)
}

const (
	fromDev    = `{action: %s, from: [{namespaces: {matchLabels: {team: b}}}]}`
	fromClient = `{action: Pass, from: [{pods: {namespaceSelector: {matchLabels: {team: b}}, podSelector: {matchLabels: {app: client}}}}]}`
	httpOnly   = `{action: Accept, from: [{namespaces: {matchLabels: {team: b}}}], protocols: [{destinationNamedPort: http}]}`
	// An operator the API server's schema lets through but no selector
	// has: the Pass rule cannot be converted and denies all instead.
	badPass = `{action: Pass, from: [{namespaces: {matchExpressions: [{key: team, operator: Near, values: [a]}]}}]}`
)

const webFromDev = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-dev, namespace: prod}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress: [{from: [{namespaceSelector: {matchLabels: {team: b}}}], ports: [{port: http}]}]
`

const (
	web, db, cli, other = "prod/web", "prod/db", "dev/client", "dev/other"
)

func pair(from, to string, port int) string { return fmt.Sprintf("%s>%s:%d", from, to, port) }

// checkClusterPolicies: a Baseline Deny applies only where no
// NetworkPolicy selects, an Admin Deny beats a NetworkPolicy's Allow, an
// Admin Pass hands the decision to the NetworkPolicy, a priority change
// reorders, an Accept on a named port, an unconvertible rule fails
// closed; once deleted only the NetworkPolicy remains.
func (c *Cluster) checkClusterPolicies(t *testing.T, ctx context.Context) {
	start := time.Now()
	expect := func(step string, want fates) { t.Helper(); c.expectFates(t, ctx, step, 0, want) }
	c.expectFates(t, ctx, "no policy", 20*time.Second, fates{pair(cli, web, 8080): true, pair(other, db, 8080): true, pair(other, web, 9090): true})

	c.mustApply(t, ctx, false, webFromDev+"---\n"+cnp("baseline-deny-dev", "Baseline", 5, fmt.Sprintf(fromDev, "Deny")))
	expect("Baseline Deny only where no NetworkPolicy selects", fates{
		pair(other, web, 8080): true, pair(other, web, 9090): false, // the NetworkPolicy
		pair(other, db, 8080): false, pair(cli, db, 9090): false, // Baseline
		pair(web, db, 8080): true, pair(db, web, 9090): false, // not from dev; web's NetworkPolicy
	})
	c.mustApply(t, ctx, false, cnp("admin-deny-dev", "Admin", 30, fmt.Sprintf(fromDev, "Deny")))
	expect("Admin Deny beats the NetworkPolicy's Allow", fates{
		pair(other, web, 8080): false, pair(cli, web, 8080): false, pair(web, db, 8080): true,
	})
	c.mustApply(t, ctx, false, cnp("admin-pass-client", "Admin", 20, fromClient))
	expect("Admin Pass (20, before the Deny at 30) hands client to the NetworkPolicy", fates{
		pair(cli, web, 8080): true, pair(cli, web, 9090): false, // the NetworkPolicy
		pair(cli, db, 8080):    false, // passed on, to the Baseline Deny
		pair(other, web, 8080): false,
	})
	c.mustApply(t, ctx, false, cnp("admin-pass-client", "Admin", 40, fromClient))
	expect("priority 40: the Admin Deny (30) comes first", fates{pair(cli, web, 8080): false})
	c.mustApply(t, ctx, false, cnp("admin-accept-http", "Admin", 1, httpOnly))
	expect("Admin Accept on the named port http", fates{
		pair(other, web, 8080): true, pair(other, web, 9090): false, pair(other, db, 8080): false,
	})
	out, err := c.applyYAML(t, ctx, false, cnp("admin-bad", "Admin", 2, badPass))
	if err != nil || !strings.Contains(out, "replaced by a deny-all rule") {
		t.Errorf("apply of an unconvertible rule: want it stored with a warning naming the deny-all stand-in, got %v:\n%s", err, out)
	}
	expect("an unconvertible Pass rule fails closed", fates{
		pair(web, db, 8080): false, pair(db, web, 9090): false,
		pair(other, web, 8080): true, // the Accept at priority 1 comes first
		pair(web, cli, 8080):   true, // dev is no subject
	})
	var all []string
	for _, n := range []string{"admin-bad", "admin-accept-http", "admin-pass-client", "admin-deny-dev", "baseline-deny-dev"} {
		all = append(all, cnp(n, "Admin", 1, fmt.Sprintf(fromDev, "Deny")))
	}
	c.mustApply(t, ctx, true, strings.Join(all, "---\n"))
	expect("ClusterNetworkPolicies deleted: only the NetworkPolicy remains", fates{
		pair(web, db, 8080): true, pair(other, db, 8080): true, pair(cli, web, 8080): true, pair(cli, web, 9090): false,
	})
	c.mustApply(t, ctx, true, webFromDev)
	t.Logf("ClusterNetworkPolicy cases in %s", time.Since(start).Round(time.Second))
}

const websvc = `apiVersion: v1
kind: Service
metadata: {name: websvc, namespace: prod}
spec:
  selector: {svc: web}
  ports: [{port: 80, targetPort: 8080, protocol: TCP}]
`

// servicePolicy is a Calico NetworkPolicy of dev with one egress rule on
// prod's websvc.
func servicePolicy(name, app, rules string) string {
	return fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: %s, namespace: dev}
spec:
  selector: app == '%s'
  types: [Egress]
  egress: %s
`, name, app, rules)
}

var (
	allowToSvc = servicePolicy("to-websvc", "client", `[{action: Allow, destination: {services: {name: websvc, namespace: prod}}}]`)
	denyToSvc  = servicePolicy("not-websvc", "other", `[{action: Deny, destination: {services: {name: websvc, namespace: prod}}}, {action: Allow}]`)
)

// checkServicesMatch (Kubernetes datastore): an egress Allow to a Service
// by name reaches its endpoints on their port and nothing else, follows
// the Service's endpoints as pods join and leave it, and a Deny by
// service blocks exactly its endpoints.
func (c *Cluster) checkServicesMatch(t *testing.T, ctx context.Context) {
	start := time.Now()
	if _, err := c.Kubectl(ctx, "apply", "-f", writeTemp(t, websvc)); err != nil {
		t.Fatal(err)
	}
	c.mustApply(t, ctx, false, allowToSvc)
	// The EndpointSlice may follow the apply.
	c.expectFates(t, ctx, "egress Allow to websvc", 20*time.Second, fates{
		pair(cli, web, 8080): true, pair(cli, web, 9090): false, // the endpoint's port only
		pair(cli, db, 8080): false, pair(cli, other, 8080): false,
		pair(other, db, 8080): true, // not selected
	})
	if _, err := c.Kubectl(ctx, "-n", "prod", "label", "pod", "db", "svc=web"); err != nil {
		t.Fatal(err)
	}
	c.expectFates(t, ctx, "db joins websvc", 20*time.Second, fates{pair(cli, db, 8080): true, pair(cli, db, 9090): false, pair(cli, web, 8080): true})
	if _, err := c.Kubectl(ctx, "-n", "prod", "label", "pod", "web", "svc-"); err != nil {
		t.Fatal(err)
	}
	c.expectFates(t, ctx, "web leaves websvc", 20*time.Second, fates{pair(cli, web, 8080): false, pair(cli, db, 8080): true})
	c.mustApply(t, ctx, true, allowToSvc)
	c.mustApply(t, ctx, false, denyToSvc)
	c.expectFates(t, ctx, "egress Deny to websvc (db only now)", 0, fates{
		pair(other, db, 8080): false, pair(other, db, 9090): true, pair(other, web, 8080): true, pair(other, cli, 8080): true,
		pair(cli, db, 8080): true, // not selected
	})
	c.mustApply(t, ctx, true, denyToSvc)
	t.Logf("services-match cases in %s", time.Since(start).Round(time.Second))
}

// waitMirroringCNPs waits (up to 2 min) until kube-controllers, started
// before the CRD was installed, mirrors ClusterNetworkPolicies: it looks
// for the CRD again every minute.
func (c *Cluster) waitMirroringCNPs(t *testing.T, ctx context.Context) {
	const probe = `apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: mirror-probe}
spec: {tier: Baseline, priority: 1, subject: {namespaces: {matchLabels: {none: none}}}, ingress: [{action: Accept, from: [{namespaces: {}}]}]}
`
	start := time.Now()
	for {
		if _, err := c.Kubectl(ctx, "apply", "-f", writeTemp(t, probe)); err == nil {
			break
		} else if time.Since(start) > time.Minute {
			t.Fatal(err) // the CRD is not served
		}
		time.Sleep(time.Second)
	}
	for {
		_, err := c.calicoctl(ctx, "get", "globalnetworkpolicy", "kcnp.mirror-probe")
		if err == nil {
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("kube-controllers mirrors no ClusterNetworkPolicy 2 min after its CRD: %v", err)
		}
		time.Sleep(time.Second)
	}
	t.Logf("kube-controllers mirrors ClusterNetworkPolicies (%s after the probe)", time.Since(start).Round(time.Second))
	if _, err := c.Kubectl(ctx, "delete", "clusternetworkpolicy", "mirror-probe"); err != nil {
		t.Fatal(err)
	}
}

// checkServicesRefused (etcd): as documented (README), a services match
// needs the Kubernetes datastore: the write is refused, naming it, and
// nothing changes.
func (c *Cluster) checkServicesRefused(t *testing.T, ctx context.Context) {
	out, err := c.applyYAML(t, ctx, false, allowToSvc)
	if err == nil || !strings.Contains(out, "services matches need the Kubernetes datastore") {
		t.Errorf("apply of a services match on etcd: want it refused naming the Kubernetes datastore, got %v:\n%s", err, out)
	}
	c.expectFates(t, ctx, "nothing applied", 0, fates{pair(cli, db, 8080): true, pair(cli, web, 8080): true})
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "obj.yaml")
	if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}
