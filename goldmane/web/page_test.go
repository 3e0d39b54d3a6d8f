package web_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/goldmane/store"
	"github.com/tabbynet/tabby/goldmane/web"
	"github.com/tabbynet/tabby/internal/headless"
)

func wep(ns, name string) (string, string, proto.EndpointType) {
	return ns, name, proto.EndpointType_WorkloadEndpoint
}

func testFlow(src, dst string, action proto.Action, hit *proto.PolicyHit, pending *proto.PolicyHit, start time.Time) *proto.Flow {
	sns, sname, st := wep("dev", src)
	dns, dname, dt := wep("shop", dst)
	k := &proto.FlowKey{SourceNamespace: sns, SourceName: sname, SourceType: st, DestNamespace: dns, DestName: dname, DestType: dt,
		DestPort: 8080, Proto: "tcp", Reporter: proto.Reporter_Dst, Action: action,
		Policies: &proto.PolicyTrace{EnforcedPolicies: []*proto.PolicyHit{hit}}}
	if pending != nil {
		k.Policies.PendingPolicies = []*proto.PolicyHit{pending}
	}
	return &proto.Flow{Key: k, StartTime: start.Unix(), EndTime: start.Unix() + 5, PacketsIn: 2, BytesIn: 120}
}

// rowsJS returns the shown rows' cells.
const rowsJS = `[...document.querySelectorAll("#rows .row")].map(r => [...r.children].map(c => c.textContent))`

// TestPageInChromium: the page loads the aggregator's flows in headless
// Chromium, filtering to denied flows leaves the denied ones naming the
// deciding policy with its trace command, the pending filter finds the
// flow a staged policy would deny, and a flow arriving later shows up
// live.
func TestPageInChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := store.New(store.Config{Interval: time.Second})
	now := time.Now()
	deny := &proto.PolicyHit{Kind: proto.PolicyKind_CalicoNetworkPolicy, Tier: "default", Namespace: "shop", Name: "backend-deny-tester", Action: proto.Action_Deny, RuleIndex: 1}
	allow := &proto.PolicyHit{Kind: proto.PolicyKind_NetworkPolicy, Tier: "default", Namespace: "shop", Name: "allow-frontend", Action: proto.Action_Allow}
	staged := &proto.PolicyHit{Kind: proto.PolicyKind_StagedNetworkPolicy, Tier: "default", Namespace: "shop", Name: "lockdown", Action: proto.Action_Deny}
	st.Add("n1", testFlow("tester", "backend", proto.Action_Deny, deny, nil, now), now)
	st.Add("n1", testFlow("frontend", "backend", proto.Action_Allow, allow, staged, now), now)
	st.Add("n1", testFlow("frontend", "web", proto.Action_Allow, allow, nil, now), now)
	srv := httptest.NewServer(web.Handler(st, time.Now))
	defer srv.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // the aggregator's rollovers
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case n := <-tk.C:
				st.Rollover(n)
			}
		}
	}()

	b, err := headless.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.Open(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var loaded struct{ Rows int }
	if err := p.WaitFor("window.tabbyLoaded", 30*time.Second, &loaded); err != nil {
		t.Fatal(err)
	}
	if loaded.Rows != 3 {
		t.Errorf("first render: %d rows, want 3", loaded.Rows)
	}

	set := func(id, v string) {
		t.Helper()
		js := `(() => { const e = document.getElementById("` + id + `"); e.value = "` + v + `"; e.dispatchEvent(new Event("change")); e.dispatchEvent(new Event("input")); return new Promise(r => requestAnimationFrame(() => setTimeout(r, 0))); })()`
		if err := p.Eval(js, nil); err != nil {
			t.Fatal(err)
		}
	}
	var cells [][]string
	set("f-action", "Deny")
	if err := p.Eval(rowsJS, &cells); err != nil {
		t.Fatal(err)
	}
	if len(cells) != 1 {
		t.Fatalf("denied flows shown: %v", cells)
	}
	row := strings.Join(cells[0], " | ")
	for _, want := range []string{"dev/tester", "shop/backend", "Deny", "np:shop/backend-deny-tester rule 1",
		"calicoctl policy trace --from dev/tester --to shop/backend --port tcp/8080"} {
		if !strings.Contains(row, want) {
			t.Errorf("denied row %q lacks %q", row, want)
		}
	}

	set("f-action", "")
	set("f-pending", "changes")
	if err := p.Eval(rowsJS, &cells); err != nil {
		t.Fatal(err)
	}
	if len(cells) != 1 || !strings.Contains(strings.Join(cells[0], "|"), "Deny by snp:shop/lockdown") {
		t.Errorf("pending verdict differs: %v", cells)
	}
	set("f-pending", "")
	set("f-policy", "allow-front")
	if err := p.Eval(rowsJS, &cells); err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2 {
		t.Errorf("policy filter allow-front: %v", cells)
	}
	set("f-policy", "")

	// Live: a flow arriving after the load appears without a reload.
	later := time.Now()
	st.Add("n2", testFlow("late", "backend", proto.Action_Deny, deny, nil, later), later)
	if err := p.WaitFor(`[...document.querySelectorAll("#rows .row")].some(r => r.textContent.includes("dev/late"))`, 10*time.Second, nil); err != nil {
		t.Error(err)
	}
	var ns []string
	if err := p.Eval(`[...document.querySelectorAll("#f-namespace option")].map(o => o.value)`, &ns); err != nil || strings.Join(ns, ",") != ",dev,shop" {
		t.Errorf("namespace choices %v %v", ns, err)
	}
}
