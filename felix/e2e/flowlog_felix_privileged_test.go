//go:build privileged && integration

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedRealFelixFlowLogs runs the real felix (agent.Run, as
// calico-node does) over etcd with flowLogsLocalReporter Enabled and a
// 1 s flowLogsFlushInterval in the default FelixConfiguration: felix
// renders NFLOG verdicts, its collector names the denying policy of a
// real connection from the datastore's objects (the syncer's updates),
// serves the flow on its flow socket, and the rule's counter is on
// /metrics. A staged deny of the allowed traffic is not enforced (no
// chain; the connection passes) and the allowed flow carries it as its
// pending verdict.
func TestPrivilegedRealFelixFlowLogs(t *testing.T) {
	e := testservers.StartEtcd(t)
	c := etcdClient(t, e)
	ctx := context.Background()
	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{FlowLogsLocalReporter: new("Enabled"),
		FlowLogsFlushInterval: &metav1.Duration{Duration: time.Second}})
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	for _, r := range []v3.Resource{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
		ct.NP("prod", "knp.default.web-8080-only", ct.Ptr(1000.0), "app == 'web'", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: ct.Proto("TCP"), Destination: v3.EntityRule{Ports: ct.Ports("8080")}}}, nil),
		&v3.StagedNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "lockdown"},
			Spec: v3.StagedNetworkPolicySpec{Order: ct.Ptr(10.0), Selector: "app == 'web'", Types: ct.Ingress,
				Ingress: []v3.Rule{{Action: v3.Deny, Protocol: ct.Proto("TCP"), Source: v3.EntityRule{Selector: "app == 'client'",
					NamespaceSelector: "all()"}}}}},
	} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	sockDir := t.TempDir()
	f := startRealFelix(t, e.Endpoint(), nodeNS, map[string]string{"TABBY_FELIX_FLOW_SOCKET_DIR": sockDir})
	eventually(t, 30*time.Second, "felix ready", f.ready)
	if save := nsRun(t, nodeNS, "iptables-save", "-t", "filter"); !strings.Contains(save, "API0|knp/prod/web-8080-only") {
		t.Fatalf("no NFLOG verdict for the policy's rule:\n%s", save)
	} else if strings.Contains(save, "lockdown") {
		t.Fatalf("the staged policy is programmed:\n%s", save)
	}
	eventually(t, 10*time.Second, "8080 allowed", func() bool { return client.tcp(web, tcpPortA) })
	if client.tcp(web, tcpPortB) {
		t.Fatal("9090 allowed")
	}
	sock := filepath.Join(sockDir, collector.SocketName)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var denied collector.Flow
	eventually(t, 3*time.Second, "the denied flow on the flow socket", func() bool {
		resp, err := hc.Get("http://node/flows?action=deny&namespace=prod")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var fl collector.Flow
			if json.Unmarshal(sc.Bytes(), &fl) == nil && fl.DestPort == tcpPortB && fl.Reporter == "Dst" {
				denied = fl
				return true
			}
		}
		return false
	})
	want := collector.PolicyHit{Kind: "eot", Tier: "default", Action: "Deny", RuleIndex: -1}
	if denied.Source.Name != "client" || denied.Dest.Name != "web" || len(denied.Enforced) != 1 || denied.Enforced[0] != want {
		t.Errorf("denied flow %+v, want dev/client -> prod/web denied at the end of tier default", denied)
	}
	lockdown := collector.PolicyHit{Kind: "snp", Tier: "default", Namespace: "prod", Name: "lockdown", Action: "Deny", RuleIndex: 0}
	if len(denied.Pending) != 1 || denied.Pending[0] != lockdown {
		t.Errorf("denied flow's pending policies %+v, want [%+v]", denied.Pending, lockdown)
	}
	var allowed collector.Flow
	eventually(t, 3*time.Second, "the allowed flow on the flow socket", func() bool {
		for _, fl := range socketFlows(hc, "action=allow&namespace=prod") {
			if fl.DestPort == tcpPortA && fl.Reporter == "Dst" {
				allowed = fl
				return true
			}
		}
		return false
	})
	knp := collector.PolicyHit{Kind: "knp", Tier: "default", Namespace: "prod", Name: "web-8080-only", Action: "Allow", RuleIndex: 0}
	if len(allowed.Enforced) != 1 || allowed.Enforced[0] != knp || len(allowed.Pending) != 1 || allowed.Pending[0] != lockdown {
		t.Errorf("allowed flow enforced %+v pending %+v, want enforced [%+v] pending [%+v] (the staged deny)", allowed.Enforced, allowed.Pending, knp, lockdown)
	}
	eventually(t, 3*time.Second, "the allowing rule's connection counter on /metrics", func() bool {
		return f.metric(`felix_policy_rule_connections_total{action="Allow",direction="ingress",namespace="prod",policy="knp.default.web-8080-only",rule_index="0",tier="default"}`) != ""
	})
}

// socketFlows are the flows the flow socket serves for the query.
func socketFlows(hc *http.Client, query string) []collector.Flow {
	resp, err := hc.Get("http://node/flows?" + query)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out []collector.Flow
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var fl collector.Flow
		if json.Unmarshal(sc.Bytes(), &fl) == nil {
			out = append(out, fl)
		}
	}
	return out
}
