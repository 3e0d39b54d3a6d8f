//go:build privileged

package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/internal/headless"
)

// TestPrivilegedLabGoldmane: the lab with its flow aggregator (up
// --flows): every node's real felix sends its flows over mutual TLS to
// the goldmane process; after a policy denies one pair and allows
// another, the aggregator's Flows.List (asked with the nodes' client
// certificate, over the same socket) has the denied flow naming the
// denying policy and rule as `calicoctl policy trace` does, and the
// allowed one naming the allowing policy; the flow page in headless
// Chromium, filtered to denied flows, shows the denying policy and the
// trace command.
func TestPrivilegedLabGoldmane(t *testing.T) {
	l, _ := upLabWith(t, UpOptions{Model: DefaultModel(), Flows: true, FlowFlush: 2 * time.Second})
	g := l.State.Goldmane
	if g == nil {
		t.Fatal("no aggregator in the lab's state")
	}
	docs := []byte(`apiVersion: projectcalico.org/v3
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
`)
	applyAndWait(t, l, docs, false)
	denied, allowed := flowProbe{"y/c", "x/b", "tcp/80", false}, flowProbe{"y/a", "x/b", "tcp/80", true}
	for _, p := range []flowProbe{denied, allowed} {
		if got := dial(t, l, p); got != p.allow {
			t.Fatalf("%s -> %s: allowed=%v, want %v", p.from, p.to, got, p.allow)
		}
	}
	rep := traceFlow(t, l, denied)
	if rep.Verdict != "Deny" {
		t.Fatalf("trace of the denied pair: %s", rep.Verdict)
	}

	// The lab's first probes (before the policies) left flows of the
	// same pairs allowed by the namespaces' profiles: look for the one
	// the policy decided.
	flows := goldmaneClient(t, g)
	last := func(f *proto.Flow) *proto.PolicyHit {
		h := f.GetKey().GetPolicies().GetEnforcedPolicies()
		if len(h) == 0 {
			return nil
		}
		return h[len(h)-1]
	}
	find := func(action proto.Action, src, policy string) (*proto.Flow, []*proto.PolicyHit) {
		var seen []*proto.PolicyHit
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			res, err := flows.List(context.Background(), &proto.FlowListRequest{Filter: &proto.Filter{
				Actions: []proto.Action{action}, SourceNames: []*proto.StringMatch{{Value: src}},
				DestNamespaces: []*proto.StringMatch{{Value: "x"}}, DestNames: []*proto.StringMatch{{Value: "b"}},
				DestPorts: []*proto.PortMatch{{Port: 80}}, Reporter: proto.Reporter_Dst}})
			if err != nil {
				t.Fatalf("Flows.List: %v", err)
			}
			seen = seen[:0]
			for _, r := range res.Flows {
				if h := last(r.Flow); h != nil && h.Name == policy {
					return r.Flow, nil
				}
				seen = append(seen, last(r.Flow))
			}
		}
		return nil, seen
	}
	if f, seen := find(proto.Action_Deny, "c", "deny-c"); f == nil {
		t.Errorf("no denied flow decided by deny-c reached the aggregator; deciding hits there: %v", seen)
	} else if h := last(f); h.Kind != proto.PolicyKind_CalicoNetworkPolicy || h.Namespace != "x" ||
		h.RuleIndex != 0 || h.Action != proto.Action_Deny || h.Tier != "default" {
		t.Errorf("denied flow's deciding hit %v (flow %v)", h, f)
	}
	if f, seen := find(proto.Action_Allow, "a", "allow-rest"); f == nil {
		t.Errorf("no allowed flow decided by allow-rest reached the aggregator; deciding hits there: %v", seen)
	} else if f.PacketsIn == 0 || f.NumConnectionsStarted == 0 {
		t.Errorf("allowed flow without counts: %v", f)
	}

	// The page, as an operator opens it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := headless.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.Open(g.Page)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.WaitFor("window.tabbyLoaded", 30*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.Eval(`(() => { const e = document.getElementById("f-action"); e.value = "Deny"; e.dispatchEvent(new Event("change")); return new Promise(r => requestAnimationFrame(() => setTimeout(r, 0))); })()`, nil); err != nil {
		t.Fatal(err)
	}
	var rows []string
	if err := p.Eval(`[...document.querySelectorAll("#rows .row")].map(r => r.textContent)`, &rows); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		if strings.Contains(r, "y/c") && strings.Contains(r, "np:x/deny-c rule 0") &&
			strings.Contains(r, "calicoctl policy trace --from y/c --to x/b --port tcp/80") {
			found = true
		}
		if !strings.Contains(r, "Deny") {
			t.Errorf("an allowed flow shown under the deny filter: %s", r)
		}
	}
	if !found {
		t.Errorf("the page's denied flows do not show y/c -> x/b denied by deny-c: %v", rows)
	}
	applyAndWait(t, l, reverseDocs(docs), true)
	downAndCheck(t, l)
}

// goldmaneClient is a Flows client of the lab's aggregator with the
// nodes' client certificate.
func goldmaneClient(t *testing.T, g *GoldmaneState) proto.FlowsClient {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(g.ClientCert, g.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(g.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cc, err := grpc.NewClient(g.Server, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return proto.NewFlowsClient(cc)
}
