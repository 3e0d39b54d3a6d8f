package commands

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/collector"
)

// TestFlows: calicoctl flows reads a node's flow socket (the collector's
// Store served as felix serves it) and prints the filtered flows as
// text, naming the deciding policy and rule and the Pass before it, or
// as JSON lines; a socket nobody serves says what to turn on.
func TestFlows(t *testing.T) {
	dir := t.TempDir()
	store := collector.NewStore(100)
	end := time.Date(2026, 12, 5, 4, 33, 58, 0, time.UTC)
	hit := func(i int, kind, tier, ns, name, action string, rule int) collector.PolicyHit {
		return collector.PolicyHit{Index: i, Kind: kind, Tier: tier, Namespace: ns, Name: name, Action: action, RuleIndex: rule}
	}
	store.Publish([]collector.Flow{
		{FlowKey: collector.FlowKey{Source: collector.Endpoint{Kind: "wep", Namespace: "dev", Name: "tester"},
			Dest: collector.Endpoint{Kind: "wep", Namespace: "shop", Name: "backend"}, SourceIP: "10.65.0.3", DestIP: "10.65.1.7",
			DestPort: 8080, Proto: "tcp", Reporter: "Dst", Action: "Deny"},
			EndTime: end, Node: "node2", Packets: 3, Bytes: 180,
			Enforced: []collector.PolicyHit{hit(0, "gnp", "security", "", "security.pass-shop", "Pass", 0), hit(1, "eot", "default", "", "", "Deny", -1)}},
		{FlowKey: collector.FlowKey{Source: collector.Endpoint{Kind: "wep", Namespace: "dev", Name: "tester"},
			Dest: collector.Endpoint{Kind: "net", Name: "pub"}, SourceIP: "10.65.0.3", DestIP: "8.8.8.8",
			DestPort: 53, Proto: "udp", Reporter: "Src", Action: "Allow"},
			EndTime: end, Node: "node1", Packets: 2, Bytes: 120, ConnectionsStarted: 1,
			Enforced: []collector.PolicyHit{hit(0, "knp", "default", "dev", "dns", "Allow", 0)}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- collector.Serve(ctx, dir, store.Handler()) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	sock := filepath.Join(dir, collector.SocketName)
	deadline := time.Now().Add(5 * time.Second)
	var out string
	var code int
	for {
		out, code = runLocal(t, "", "", nil, "flows", "--socket", sock, "--action", "deny")
		if code == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	wantLine := "node2 dev/tester 10.65.0.3 -> shop/backend 10.65.1.7:8080/tcp INGRESS DENIED by end of tier default [pass: security gnp security.pass-shop rule 0] packets=3 bytes=180 conns=0"
	if code != 0 || !strings.Contains(out, wantLine) || strings.Contains(out, "8.8.8.8") {
		t.Errorf("--action deny:\n%s\nwant the line %q only", out, wantLine)
	}
	out, code = runLocal(t, "", "", nil, "flows", "--socket", sock, "--namespace", "dev", "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")[2:] // after the command and exit lines
	if code != 0 || len(lines) != 2 {
		t.Fatalf("-o json:\n%s", out)
	}
	var f collector.Flow
	if err := json.Unmarshal([]byte(lines[1]), &f); err != nil || f.DestIP != "8.8.8.8" || f.Enforced[0].Kind != "knp" || f.Enforced[0].Name != "dns" {
		t.Errorf("json flow %s: %v", lines[1], err)
	}
	out, code = runLocal(t, "", "", nil, "flows", "--socket", sock, "--pod", "shop/backend")
	if code != 0 || !strings.Contains(out, "shop/backend") || strings.Contains(out, "8.8.8.8") {
		t.Errorf("--pod shop/backend:\n%s", out)
	}
	out, code = runLocal(t, "", "", nil, "flows", "--socket", filepath.Join(dir, "absent.sock"))
	if code == 0 || !strings.Contains(out, "FlowLogsLocalReporter") {
		t.Errorf("absent socket:\n%s", out)
	}
	if out, code = runLocal(t, "", "", nil, "flows", "--action", "drop"); code == 0 || !strings.Contains(out, "allow or deny") {
		t.Errorf("--action drop:\n%s", out)
	}
}

// TestFlowsFollow: --follow prints the flushes published after it
// started, until the stream breaks (the node went away: an error naming
// the socket).
func TestFlowsFollow(t *testing.T) {
	dir := t.TempDir()
	store := collector.NewStore(100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- collector.Serve(ctx, dir, store.Handler()) }()
	sock := filepath.Join(dir, collector.SocketName)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, code := runLocal(t, "", "", nil, "flows", "--socket", sock); code == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("the flow socket never answered")
		}
	}
	out := make(chan string, 1)
	go func() {
		o, _ := runLocal(t, "", "", nil, "flows", "--socket", sock, "--follow", "--namespace", "later")
		out <- o
	}()
	time.Sleep(300 * time.Millisecond)
	store.Publish([]collector.Flow{{FlowKey: collector.FlowKey{Source: collector.Endpoint{Kind: "wep", Namespace: "later", Name: "a"},
		Dest: collector.Endpoint{Kind: "net", Name: "pub"}, SourceIP: "10.0.0.9", DestIP: "1.1.1.1", DestPort: 443, Proto: "tcp",
		Reporter: "Src", Action: "Allow"}, Enforced: []collector.PolicyHit{{Kind: "pro", Tier: "__PROFILE__", Name: "kns.later", Action: "Allow"}}}})
	time.Sleep(300 * time.Millisecond)
	cancel() // the node goes away: the stream ends
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-out:
		if !strings.Contains(o, "later/a 10.0.0.9 -> pub 1.1.1.1:443/tcp EGRESS ALLOWED by profile kns.later rule 0") ||
			!strings.Contains(o, "reading flows from "+sock) {
			t.Errorf("--follow:\n%s", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("--follow did not end with the stream")
	}
}

// TestFlowLinePending: a flow whose pending path (a staged deny) differs
// from the enforced one shows the pending verdict; one whose pending path
// is the enforced one shows none.
func TestFlowLinePending(t *testing.T) {
	allow := collector.PolicyHit{Kind: "np", Tier: "default", Namespace: "x", Name: "allow", Action: "Allow", RuleIndex: 0}
	staged := collector.PolicyHit{Kind: "snp", Tier: "default", Namespace: "x", Name: "lockdown", Action: "Deny", RuleIndex: 0}
	f := &collector.Flow{FlowKey: collector.FlowKey{Reporter: "Dst", Action: "Allow"}, Enforced: []collector.PolicyHit{allow}, Pending: []collector.PolicyHit{staged}}
	if got := FlowLine(f); !strings.Contains(got, "[pending: deny by default snp x/lockdown rule 0]") {
		t.Errorf("line %q does not show the pending deny", got)
	}
	f.Pending = []collector.PolicyHit{allow}
	if got := FlowLine(f); strings.Contains(got, "pending") {
		t.Errorf("line %q shows a pending verdict equal to the enforced one", got)
	}
}
