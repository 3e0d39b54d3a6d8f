//go:build privileged

package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/felix/collector"
)

// flowFlush is the lab's FlowLogsFlushInterval in TestPrivilegedLabFlows.
const flowFlush = 2 * time.Second

// flowSetup is one policy set applied to the lab, and the pairs probed
// under it.
type flowSetup struct {
	name   string
	docs   func(l *Lab) string
	probes []flowProbe
	// restore, when set, is applied at the end instead of deleting docs
	// (a setup that changes what the lab made: a namespace's profile).
	restore string
}

// flowProbe is one connection: from a pod to a pod ("<ns>/<pod>") or to
// a node's own address (its name: the test's server on hostPort in the
// node's namespace), a port, and the outcome the setup is written for.
type flowProbe struct {
	from, to, port string
	allow          bool
}

// TestPrivilegedLabFlows: "why is my traffic blocked?" on one lab (etcd)
// with flow logs on (flowLogsFlushInterval 1s) and felix's metrics: policy
// setups of every kind applied in sequence (Kubernetes NetworkPolicy,
// Calico NetworkPolicy, GlobalNetworkPolicy in tiers with Pass and a tier
// passing by default, GlobalNetworkSet and NetworkSet peers, a
// service-account selector, egress, profiles deciding, a staged policy).
// For every probed pair: the probe is as the setup intends, `calicoctl
// policy trace` (the README's first command) gives the probe's verdict,
// the flow appears on the reporting node's flow socket within 2 flush
// intervals naming the same tier, policy and rule as the trace at each
// endpoint the packet reached (and the staged policy's pending verdict),
// that rule's counters on felix's /metrics grow, and `calicoctl flows
// --action deny` (the README's second command) lists each denied flow.
func TestPrivilegedLabFlows(t *testing.T) {
	start := time.Now()
	l, _ := upLab(t, DefaultModel(), DatastoreEtcd)
	enableFlowLogs(t, l)
	serveHosts(t, l)
	n := 0
	var slowest time.Duration // the longest a flow took to be on its node's socket
	for _, s := range flowSetups() {
		t.Run(s.name, func(t *testing.T) {
			docs := []byte(s.docs(l))
			applyAndWait(t, l, docs, false)
			if s.restore != "" {
				defer func() {
					if rest := withoutProfiles(docs); len(rest) > 0 {
						applyAndWait(t, l, reverseDocs(rest), true)
					}
					applyAndWait(t, l, []byte(s.restore), false)
				}()
			} else {
				defer applyAndWait(t, l, reverseDocs(docs), true) // policies before their tier
			}
			// Staged policies are never programmed (nothing to wait for)
			// and reach the collectors through the same watch; a flush
			// interval also keeps the last setup's flows apart.
			time.Sleep(flowFlush)
			for _, p := range s.probes {
				n++
				slowest = max(slowest, checkFlow(t, l, p))
			}
		})
	}
	t.Logf("%d setups, %d probed pairs, %s with the lab's up; the slowest flow was published %s after its probe began (by the flush ending its interval; flush interval %s)",
		len(flowSetups()), n, time.Since(start).Round(time.Second), slowest.Round(time.Millisecond), flowFlush)
	downAndCheck(t, l)
}

// enableFlowLogs turns flow logs (1 s flushes) and felix's metrics on
// through the default FelixConfiguration (felix restarts inside
// calico-node to apply them) and waits for every node's flow socket and
// metrics.
func enableFlowLogs(t *testing.T, l *Lab) {
	calicoctlRun(t, l, "patch", "felixconfiguration", "default", "-p",
		`{"spec":{"prometheusMetricsEnabled":true,"flowLogsLocalReporter":"Enabled","flowLogsFlushInterval":"2s"}}`)
	waitNodes(t, l, "the flow socket and felix's metrics", func(n NodeState) bool {
		_, err := os.Stat(filepath.Join(FlowSocketDir(&n), collector.SocketName))
		return err == nil && metricsServed(n)
	})
	probeUntil(t, l, allAllowed, 30*time.Second)
}

// flowSetups are the policy setups, each with the pairs it probes.
func flowSetups() []flowSetup {
	return slices.Concat(policySetups(), morePolicySetups(), profileSetups(), hostEndpointSetups())
}

// fixed is a setup's documents that do not depend on the lab.
func fixed(s string) func(*Lab) string { return func(*Lab) string { return s } }

// policySetups: Kubernetes and Calico policies, tiers with Pass, network
// sets, a service-account selector, egress, staged policies.
func policySetups() []flowSetup {
	return []flowSetup{
		{"k8s-default-deny", fixed(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: x}
spec: {podSelector: {}, policyTypes: [Ingress]}
`), []flowProbe{{"y/a", "x/a", "tcp/80", false}, {"x/b", "x/c", "tcp/80", false}, {"x/b", "y/a", "tcp/80", true}}, ""},
		{"k8s-allow-from-namespace-port", fixed(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: a-from-y-80, namespace: x}
spec:
  podSelector: {matchLabels: {pod: a}}
  policyTypes: [Ingress]
  ingress:
  - from: [{namespaceSelector: {matchLabels: {ns: "y"}}}]
    ports: [{protocol: TCP, port: 80}]
`), []flowProbe{{"y/b", "x/a", "tcp/80", true}, {"z/b", "x/a", "tcp/80", false}, {"y/b", "x/a", "tcp/81", false}}, ""},
		{"calico-np-order", fixed(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: deny-c, namespace: x}
spec:
  order: 10
  selector: all()
  ingress: [{action: Deny, source: {selector: pod == 'c', namespaceSelector: all()}}]
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: allow-rest, namespace: x}
spec:
  order: 20
  selector: all()
  ingress: [{action: Allow}]
`), []flowProbe{{"y/c", "x/b", "tcp/80", false}, {"y/a", "x/b", "tcp/80", true}}, ""},
		{"tier-pass-then-profile", fixed(`apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: security}
spec: {order: 100}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: security.guard-x}
spec:
  tier: security
  selector: projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - {action: Pass, source: {namespaceSelector: "ns in {'x', 'y'}"}}
  - {action: Deny}
`), []flowProbe{{"y/a", "x/c", "tcp/80", true}, {"z/a", "x/c", "tcp/80", false}, {"x/a", "x/c", "tcp/81", true}}, ""},
		{"tiers-pass-to-default-tier", fixed(`apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: platform}
spec: {order: 50}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: platform.pass-all}
spec:
  tier: platform
  selector: projectcalico.org/namespace == 'y'
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, destination: {ports: [81]}}, {action: Pass}]
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: y-only-from-x, namespace: "y"}
spec:
  selector: all()
  ingress: [{action: Allow, source: {namespaceSelector: ns == 'x'}}]
`), []flowProbe{{"x/a", "y/b", "tcp/81", false}, {"x/a", "y/b", "tcp/80", true}, {"z/a", "y/b", "tcp/80", false}}, ""},
		{"tier-default-pass", fixed(`apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: audit}
spec: {order: 60, defaultAction: Pass}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: audit.deny-b-81}
spec:
  tier: audit
  selector: projectcalico.org/namespace == 'z'
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, source: {selector: pod == 'b', namespaceSelector: all()}, destination: {ports: [81]}}]
`), []flowProbe{{"x/b", "z/a", "tcp/81", false}, {"x/a", "z/a", "tcp/81", true}}, ""},
		{"global-network-set", func(l *Lab) string {
			return fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: GlobalNetworkSet
metadata: {name: blocked, labels: {role: blocked}}
spec: {nets: ["%s/32", "%s/32"]}
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: deny-blocked, namespace: x}
spec:
  selector: all()
  ingress: [{action: Deny, source: {selector: role == 'blocked', namespaceSelector: global()}}, {action: Allow}]
`, podIP(l, "y/a"), podIP(l, "z/c"))
		}, []flowProbe{{"y/a", "x/a", "tcp/80", false}, {"z/c", "x/b", "tcp/80", false}, {"z/a", "x/a", "tcp/80", true}}, ""},
		{"namespaced-network-set", func(l *Lab) string {
			return fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: NetworkSet
metadata: {name: trusted, namespace: x, labels: {trusted: "yes"}}
spec: {nets: ["%s/32"]}
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: only-trusted, namespace: x}
spec:
  selector: pod == 'c'
  types: [Ingress]
  ingress: [{action: Allow, source: {selector: trusted == 'yes'}}]
`, podIP(l, "z/b"))
		}, []flowProbe{{"z/b", "x/c", "tcp/80", true}, {"z/a", "x/c", "tcp/80", false}}, ""},
		{"service-account-selector", fixed(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: sa-from-y, namespace: x}
spec:
  serviceAccountSelector: projectcalico.org/name == 'default'
  types: [Ingress]
  ingress: [{action: Allow, source: {namespaceSelector: ns == 'y'}}]
`), []flowProbe{{"y/c", "x/b", "tcp/80", true}, {"z/c", "x/b", "tcp/80", false}}, ""},
		{"egress", fixed(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: a-egress, namespace: x}
spec:
  selector: pod == 'a'
  types: [Egress]
  egress: [{action: Deny, destination: {namespaceSelector: ns == 'z'}}, {action: Allow}]
`), []flowProbe{{"x/a", "z/a", "tcp/80", false}, {"x/a", "y/c", "tcp/80", true}}, ""},
		{"global-egress-port", fixed(`apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: no-81-to-x}
spec:
  selector: projectcalico.org/namespace == 'y'
  types: [Egress]
  egress:
  - {action: Deny, protocol: TCP, destination: {namespaceSelector: ns == 'x', ports: [81]}}
  - {action: Allow}
`), []flowProbe{{"y/a", "x/a", "tcp/81", false}, {"y/a", "x/a", "tcp/80", true}, {"y/b", "z/b", "tcp/81", true}}, ""},
		{"staged-deny-over-allowed", fixed(`apiVersion: projectcalico.org/v3
kind: StagedNetworkPolicy
metadata: {name: lockdown, namespace: x}
spec:
  stagedAction: Set
  selector: all()
  types: [Ingress]
  ingress: [{action: Deny, source: {namespaceSelector: ns == 'z'}}]
`), []flowProbe{{"z/a", "x/a", "tcp/80", true}, {"y/a", "x/b", "tcp/80", true}}, ""},
		{"staged-global-in-tier", fixed(`apiVersion: projectcalico.org/v3
kind: Tier
metadata: {name: preview}
spec: {order: 70}
---
apiVersion: projectcalico.org/v3
kind: StagedGlobalNetworkPolicy
metadata: {name: preview.deny-81}
spec:
  tier: preview
  selector: all()
  types: [Ingress]
  ingress: [{action: Deny, protocol: TCP, destination: {ports: [81]}}, {action: Pass}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-from-z, namespace: "y"}
spec:
  podSelector: {}
  policyTypes: [Ingress]
  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: x}}}, {namespaceSelector: {matchLabels: {ns: "y"}}}]}]
`), []flowProbe{{"x/c", "y/a", "tcp/81", true}, {"z/c", "y/a", "tcp/80", false}}, ""},
	}
}

// withoutProfiles is a multi-document YAML file less its Profiles (a
// setup restores those instead of deleting them).
func withoutProfiles(b []byte) []byte {
	var keep []string
	for _, d := range docSeparator.Split(string(b), -1) {
		if strings.TrimSpace(d) != "" && !strings.Contains(d, "\nkind: Profile\n") && !strings.HasPrefix(d, "kind: Profile\n") {
			keep = append(keep, d)
		}
	}
	return []byte(strings.Join(keep, "\n---\n"))
}

// reverseDocs is a multi-document YAML file with its documents in
// reverse order.
func reverseDocs(b []byte) []byte {
	parts := docSeparator.Split(string(b), -1)
	slices.Reverse(parts)
	return []byte(strings.Join(parts, "\n---\n"))
}

// podIP is the lab's address of pod key.
func podIP(l *Lab, key string) string {
	for _, p := range l.State.Pods {
		if p.Key() == key {
			return p.IP
		}
	}
	panic("no pod " + key)
}

func podOf(t *testing.T, l *Lab, key string) PodState {
	for _, p := range l.State.Pods {
		if p.Key() == key {
			return p
		}
	}
	t.Fatalf("no pod %s", key)
	return PodState{}
}

// checkFlow probes one pair and checks trace, flows and counters agree.
// Flows are checked as Calico's collector reports them: at a workload
// of the node, naming that workload's own policies; a host endpoint's
// chain (its applyOnForward, preDNAT or normal policy) gives no flow, so
// for those hops the test checks the rule's counters grew and that no
// flow names the host endpoint's policy. It returns how long the slowest
// of the probe's flows took to be on its node's socket.
func checkFlow(t *testing.T, l *Lab, p flowProbe) time.Duration {
	t.Helper()
	desc := fmt.Sprintf("%s -> %s %s", p.from, p.to, p.port)
	rep := traceFlow(t, l, p)
	hops := decidingHits(rep)
	before := map[string]float64{}
	for _, h := range hops {
		before[h.key()] = ruleCount(t, l, h)
	}
	sent := time.Now()
	allowed := dial(t, l, p)
	if allowed != p.allow {
		t.Errorf("%s: probe allowed=%v, the setup intends %v", desc, allowed, p.allow)
	}
	if got := rep.Verdict == "Allow"; got != allowed {
		t.Errorf("%s: trace verdict %s, probe allowed=%v", desc, rep.Verdict, allowed)
	}
	if allowed != p.allow || rep.Verdict == "Allow" != allowed {
		t.Logf("%s: the trace's deciding hits: %+v", desc, hops)
	}
	flowDeny := false
	var slowest time.Duration
	for _, h := range hops {
		if !h.flow {
			continue
		}
		flowDeny = flowDeny || h.enforced.Action == "Deny"
		f := waitForFlow(t, l, h, p, sent)
		if f == nil {
			var seen []string
			for _, f := range nodeFlows(t, l, h.node, "") {
				if f.SourceIP == endIP(l, p.from) && f.DestIP == endIP(l, p.to) {
					seen = append(seen, fmt.Sprintf("%s %s %d %s started=%d pkts=%d end=%s", f.Reporter, f.Action, f.DestPort, fmt.Sprint(f.Enforced), f.ConnectionsStarted, f.Packets, f.EndTime.Format("15:04:05.000")))
				}
			}
			t.Errorf("%s: no %s flow on node %s within %v of %s; the pair's flows there: %v", desc, h.reporter, h.node,
				2*flowFlush+flowFlush/2, sent.Format("15:04:05.000"), seen)
			continue
		}
		// The flow was published by the flush that ended its interval.
		slowest = max(slowest, f.EndTime.Sub(sent))
		if got := lastVerdict(f.Enforced); got != h.enforced {
			t.Errorf("%s: %s flow's deciding policy %+v, trace %+v (flow %+v)", desc, h.reporter, got, h.enforced, f.Enforced)
		}
		if h.pending != nil {
			if got := lastVerdict(f.Pending); got != *h.pending {
				t.Errorf("%s: %s flow's pending verdict %+v, trace %+v (pending %+v)", desc, h.reporter, got, *h.pending, f.Pending)
			}
		}
	}
	hostHits := checkHostHits(t, l, p, hops, sent)
	for _, h := range hops {
		if after := ruleCount(t, l, h); after <= before[h.key()] {
			t.Errorf("%s: counters of %+v on %s did not grow (%v -> %v)", desc, h.enforced, h.node, before[h.key()], after)
		}
	}
	if flowDeny {
		out := calicoctlOut(t, l, append([]string{"flows", "--action", "deny", "-o", "json"}, socketFlags(l)...)...)
		if !strings.Contains(out, `"source_ip":"`+endIP(l, p.from)+`"`) {
			t.Errorf("%s: calicoctl flows --action deny does not list it", desc)
		}
	}
	if hostHits > 0 {
		t.Logf("%s: %d host endpoint verdicts: counted, in no flow (as Calico)", desc, hostHits)
	}
	return slowest
}

// checkHostHits checks that no flow names the host endpoint hops' policies
// (Calico reports no flow for them) once the flush that would hold them
// is out; it returns how many such hops the trace had.
func checkHostHits(t *testing.T, l *Lab, p flowProbe, hops []hopHit, sent time.Time) int {
	n := 0
	for _, h := range hops {
		if h.flow {
			continue
		}
		n++
		if wait := time.Until(sent.Add(flowFlush + flowFlush/2)); wait > 0 {
			time.Sleep(wait)
		}
		for _, f := range nodeFlows(t, l, h.node, p.from) {
			if !f.EndTime.After(sent) || f.SourceIP != endIP(l, p.from) || f.DestIP != endIP(l, p.to) {
				continue
			}
			for _, hit := range f.Enforced {
				if hit.Kind == h.enforced.Kind && hit.Name == h.enforced.Name && hit.Namespace == h.enforced.Namespace && h.enforced.Kind != "pro" {
					t.Errorf("%s -> %s %s: a %s flow on %s names the host endpoint's policy %+v (Calico reports none): %+v",
						p.from, p.to, p.port, f.Reporter, h.node, h.enforced, f.Enforced)
				}
			}
		}
	}
	return n
}

// hopHit is what one chain of a trace decided: the node and reporter
// (Src at the source's egress, Dst at the destination's ingress), the
// deciding hit as a flow names it, the pending one when staged policies
// exist, and whether a flow names it (a workload's chain; a host
// endpoint's chains are counted only).
type hopHit struct {
	node, reporter string
	ingress, flow  bool
	enforced       collector.PolicyHit
	pending        *collector.PolicyHit
}

func (h hopHit) key() string {
	return fmt.Sprintf("%s/%s/%v/%s/%s/%d", h.node, h.reporter, h.ingress, h.enforced.Tier, h.enforced.Name, h.enforced.RuleIndex)
}

// traceFlow runs `calicoctl policy trace -o json` for the probe.
func traceFlow(t *testing.T, l *Lab, p flowProbe) traceReport {
	from, to := p.from, p.to
	if !strings.Contains(to, "/") {
		to = endIP(l, to)
	}
	out := calicoctlOut(t, l, "policy", "trace", "--from", from, "--to", to, "--port", p.port, "-o", "json")
	var rep traceReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("trace output: %v\n%s", err, out)
	}
	return rep
}

// traceReport is what the test reads of calicoctl's TraceReport.
type traceReport struct {
	Verdict string `json:"verdict"`
	Hops    []struct {
		Node      string       `json:"node"`
		Endpoint  string       `json:"endpoint"`
		Direction string       `json:"direction"`
		Stage     string       `json:"stage"`
		Skipped   bool         `json:"skipped"`
		Verdict   string       `json:"verdict"`
		Tiers     []traceTier  `json:"tiers"`
		Profiles  []traceMatch `json:"profiles"`
		Pending   *struct {
			Tiers    []traceTier  `json:"tiers"`
			Profiles []traceMatch `json:"profiles"`
		} `json:"pending"`
	} `json:"hops"`
}

type traceTier struct {
	Name      string       `json:"name"`
	Policies  []traceMatch `json:"policies"`
	EndOfTier string       `json:"endOfTier"`
}

type traceMatch struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Match     *struct {
		Index  int    `json:"index"`
		Action string `json:"action"`
	} `json:"match"`
}

// decidingHits are the trace's chains that decided (as flow log hits):
// workloads' policy chains, and host endpoints' policy, applyOnForward
// and preDNAT chains that allowed or denied (doNotTrack chains are not
// logged, felix's fixed rules have no policy).
func decidingHits(rep traceReport) []hopHit {
	var out []hopHit
	for _, h := range rep.Hops {
		workload := h.Stage == "policy" && strings.Contains(h.Endpoint, "/")
		switch {
		case h.Skipped || h.Verdict == "NotReached":
			continue
		case h.Stage != "policy" && h.Stage != "forward" && h.Stage != "preDNAT":
			continue
		case !workload && h.Verdict != "Deny" && !(h.Verdict == "Allow" && hasDecision(h.Tiers, h.Profiles)):
			continue // no policy decided (a forward chain with none lets the packet on): nothing logged
		}
		hh := hopHit{node: h.Node, reporter: "Src", ingress: h.Direction == "ingress", flow: workload}
		if hh.ingress {
			hh.reporter = "Dst"
		}
		hh.enforced = decided(h.Tiers, h.Profiles)
		if h.Pending != nil && workload {
			p := decided(h.Pending.Tiers, h.Pending.Profiles)
			hh.pending = &p
		}
		out = append(out, hh)
	}
	return out
}

// hasDecision says whether a policy, a tier's end or a profile decided
// in a chain's trace.
func hasDecision(tiers []traceTier, profiles []traceMatch) bool {
	for _, t := range tiers {
		for _, p := range t.Policies {
			if p.Match != nil && (p.Match.Action == "Allow" || p.Match.Action == "Deny") {
				return true
			}
		}
		if t.EndOfTier == "Deny" {
			return true
		}
	}
	for _, p := range profiles {
		if p.Match != nil && (p.Match.Action == "Allow" || p.Match.Action == "Deny") {
			return true
		}
	}
	return false
}

// decided is the verdict of one chain's trace as a flow log hit.
func decided(tiers []traceTier, profiles []traceMatch) collector.PolicyHit {
	for _, t := range tiers {
		for _, p := range t.Policies {
			if p.Match == nil || (p.Match.Action != "Allow" && p.Match.Action != "Deny") {
				continue
			}
			h := collector.PolicyHit{Tier: t.Name, Namespace: p.Namespace, Name: p.Name, Action: p.Match.Action, RuleIndex: p.Match.Index}
			switch p.Kind {
			case "GlobalNetworkPolicy":
				h.Kind = "gnp"
			case "KubernetesNetworkPolicy":
				h.Kind, h.Name = "knp", strings.TrimPrefix(p.Name, "knp.default.")
			case "StagedNetworkPolicy":
				h.Kind = "snp"
			case "StagedGlobalNetworkPolicy":
				h.Kind = "sgnp"
			case "StagedKubernetesNetworkPolicy":
				h.Kind = "sknp"
			default:
				h.Kind = "np"
			}
			return h
		}
		if t.EndOfTier == "Deny" {
			return collector.PolicyHit{Kind: "eot", Tier: t.Name, Action: "Deny", RuleIndex: -1}
		}
	}
	for _, p := range profiles {
		if p.Match != nil && (p.Match.Action == "Allow" || p.Match.Action == "Deny") {
			return collector.PolicyHit{Kind: "pro", Tier: collector.ProfileTier, Name: p.Name, Action: p.Match.Action, RuleIndex: p.Match.Index}
		}
	}
	return collector.PolicyHit{Kind: "pro", Tier: collector.ProfileTier, Action: "Deny", RuleIndex: -1}
}

// lastVerdict is a path's deciding hit (the last that is no Pass), Index
// cleared.
func lastVerdict(path []collector.PolicyHit) collector.PolicyHit {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i].Action != "Pass" {
			h := path[i]
			h.Index = 0
			return h
		}
	}
	return collector.PolicyHit{}
}

// dial makes one connection of the probe (as Probe does; to a node, to
// the test's server on its address).
func dial(t *testing.T, l *Lab, p flowProbe) bool {
	from := podOf(t, l, p.from)
	proto, port, _ := strings.Cut(p.port, "/")
	want := "host"
	if strings.Contains(p.to, "/") {
		want = podOf(t, l, p.to).Key()
	}
	netns, err := ns.GetNS(netnsPath(from.Netns))
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	var detail string
	if err := netns.Do(func(ns.NetNS) error {
		detail = probeOne(context.Background(), proto, net.JoinHostPort(endIP(l, p.to), port), want, time.Second, nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return detail == ""
}

// hostPort is the port of the test's server on each node's own address.
const hostPort = 8088

// endIP is the address of a probe's end: a pod ("<ns>/<pod>") or a node
// (its name).
func endIP(l *Lab, key string) string {
	if strings.Contains(key, "/") {
		return podIP(l, key)
	}
	for _, n := range l.State.Nodes {
		if n.Name == key {
			return peerAddr(n)
		}
	}
	panic("no pod or node " + key)
}

// serveHosts runs a TCP server answering "host" on each node's address,
// port hostPort, in the node's namespace (the socket stays there), until
// the test ends.
func serveHosts(t *testing.T, l *Lab) {
	for _, n := range l.State.Nodes {
		h, err := ns.GetNS(netnsPath(n.Netns))
		if err != nil {
			t.Fatal(err)
		}
		var ln net.Listener
		err = h.Do(func(ns.NetNS) error {
			var err error
			ln, err = net.Listen("tcp", net.JoinHostPort(peerAddr(n), strconv.Itoa(hostPort)))
			return err
		})
		h.Close()
		if err != nil {
			t.Fatalf("%s: a server on its address: %v", n.Name, err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("host\n"))
				c.Close()
			}
		}()
	}
}

// waitForFlow waits up to 2 flush intervals (and a half, for the flush
// in flight) for the flow of the probe that hop h reports: started (an
// allowed connection) or with packets (denied) after sent.
func waitForFlow(t *testing.T, l *Lab, h hopHit, p flowProbe, sent time.Time) *collector.Flow {
	src, dst := endIP(l, p.from), endIP(l, p.to)
	_, port, _ := strings.Cut(p.port, "/")
	deadline := sent.Add(2*flowFlush + flowFlush/2)
	for {
		for _, f := range nodeFlows(t, l, h.node, p.from) {
			if f.SourceIP == src && f.DestIP == dst && strconv.Itoa(int(f.DestPort)) == port && f.Reporter == h.reporter &&
				f.EndTime.After(sent) && (f.ConnectionsStarted > 0 || f.Action == "Deny" && f.Packets > 0) {
				return &f
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeFlows are the flows on node's flow socket that involve pod (any
// flow when "").
func nodeFlows(t *testing.T, l *Lab, node, pod string) []collector.Flow {
	var sock string
	for i := range l.State.Nodes {
		if n := &l.State.Nodes[i]; n.Name == node {
			sock = filepath.Join(FlowSocketDir(n), collector.SocketName)
		}
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://node/flows?pod=" + url.QueryEscape(pod))
	if err != nil {
		t.Fatalf("node %s's flow socket: %v", node, err)
	}
	defer resp.Body.Close()
	var out []collector.Flow
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var f collector.Flow
		if json.Unmarshal(sc.Bytes(), &f) == nil {
			out = append(out, f)
		}
	}
	return out
}

// ruleCount is the packets and connections counted for h's rule on its
// node (felix's /metrics).
func ruleCount(t *testing.T, l *Lab, h hopHit) float64 {
	var node NodeState
	for _, n := range l.State.Nodes {
		if n.Name == h.node {
			node = n
		}
	}
	c, netns, err := nodeHTTPClient(node, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	resp, err := c.Get("http://127.0.0.1:9091/metrics")
	if err != nil {
		t.Fatalf("%s's metrics: %v", h.node, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	e := h.enforced
	policy := e.Name
	if e.Kind == "knp" {
		policy = "knp.default." + policy
	}
	dir := "egress"
	if h.ingress {
		dir = "ingress"
	}
	labels := fmt.Sprintf(`{action=%q,direction=%q,namespace=%q,policy=%q,rule_index="%d",tier=%q}`, e.Action, dir, e.Namespace, policy, e.RuleIndex, e.Tier)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		for _, m := range []string{"felix_policy_rule_packets_total", "felix_policy_rule_connections_total"} {
			if v, ok := strings.CutPrefix(line, m+labels+" "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return sum
}

// socketFlags are calicoctl flows' --socket flags for every node.
func socketFlags(l *Lab) []string {
	var out []string
	for i := range l.State.Nodes {
		out = append(out, "--socket", filepath.Join(FlowSocketDir(&l.State.Nodes[i]), collector.SocketName))
	}
	return out
}

// calicoctlOut runs the lab's calicoctl against its datastore and returns
// its output.
func calicoctlOut(t *testing.T, l *Lab, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.Bin, "calicoctl"), args...)
	cmd.Env = append(os.Environ(), l.datastoreEnv()...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("calicoctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
