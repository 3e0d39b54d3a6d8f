package health

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/node/birdctl"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestLivenessNoticesAStuckLoop: a component whose loop stops beating is
// not live once its timeout passes, though it said it was ready; a beat
// makes it live again. Components without a timeout are always live.
func TestLivenessNoticesAStuckLoop(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	a := NewAggregator(clk.now)
	felix := a.Register("felix/calculation", 30*time.Second)
	felix.SetReady(true, "")
	a.Register("static", 0).SetReady(true, "")
	live := func() bool {
		r, err := a.Reports()
		if err != nil {
			t.Fatal(err)
		}
		ok, _ := Summary(r, "liveness")
		return ok
	}
	clk.t = clk.t.Add(29 * time.Second)
	if !live() {
		t.Fatal("not live within the timeout")
	}
	clk.t = clk.t.Add(2 * time.Second)
	if live() {
		t.Fatal("live after the loop stopped beating for 31s")
	}
	r, _ := a.Reports("felix")
	if _, text := Summary(r, "liveness"); !strings.Contains(text, "felix/calculation: FAIL (no heartbeat for 31s)") {
		t.Errorf("liveness text %q", text)
	}
	felix.Heartbeat()
	if !live() {
		t.Fatal("not live after a beat")
	}
}

// TestHandler: /readiness is 503 naming the component and its reason
// until every component is ready; ?component= restricts it; an unknown
// component is 404.
func TestHandler(t *testing.T) {
	a := NewAggregator(nil)
	f := a.Register("felix/dataplane", time.Minute)
	b := a.Register("bgp", 0)
	ready := false
	f.SetReadyFunc(func() (bool, string) { return ready, "dataplane not in sync" })
	b.SetReady(false, "BGP not established with 10.0.0.2")
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/readiness"); code != 503 || !strings.Contains(body, "bgp: FAIL (BGP not established with 10.0.0.2)") ||
		!strings.Contains(body, "felix/dataplane: FAIL (dataplane not in sync)") {
		t.Errorf("/readiness: %d %q", code, body)
	}
	ready = true
	if code, _ := get("/readiness?component=felix"); code != 200 {
		t.Errorf("felix's readiness: %d, want 200", code)
	}
	if code, _ := get("/readiness"); code != 503 {
		t.Errorf("/readiness with BGP down: %d, want 503", code)
	}
	b.SetReady(true, "")
	if code, _ := get("/readiness"); code != 200 {
		t.Errorf("/readiness: %d, want 200", code)
	}
	if code, _ := get("/liveness"); code != 200 {
		t.Errorf("/liveness: %d, want 200", code)
	}
	if code, _ := get("/readiness?component=nope"); code != 404 {
		t.Errorf("unknown component: %d, want 404", code)
	}
}

// TestBIRDReady is Calico's rule: all sessions up (and no graceful
// restart running) within the threshold of the start, one after it.
func TestBIRDReady(t *testing.T) {
	up := birdctl.Peer{PeerIP: netip.MustParseAddr("10.0.0.2"), BGPState: "Established"}
	down := birdctl.Peer{PeerIP: netip.MustParseAddr("10.0.0.3"), BGPState: "Active"}
	for _, tc := range []struct {
		name    string
		peers   []birdctl.Peer
		gr      bool
		since   time.Duration
		wantErr string
	}{
		{"no peers", nil, false, 0, ""},
		{"early, all up", []birdctl.Peer{up}, false, time.Second, ""},
		{"early, one down", []birdctl.Peer{up, down}, false, time.Second, "BGP not established with 10.0.0.3"},
		{"early, graceful restart", []birdctl.Peer{up}, true, time.Second, "graceful restart in progress"},
		{"later, one up", []birdctl.Peer{up, down}, false, time.Hour, ""},
		{"later, all down", []birdctl.Peer{down}, false, time.Hour, "BGP not established with 10.0.0.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := BIRDReady(tc.peers, tc.gr, tc.since, 30*time.Second)
			if (err == nil) != (tc.wantErr == "") || err != nil && err.Error() != tc.wantErr {
				t.Errorf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestProbeNeedsACheck: without a flag the probe refuses, as Calico's.
func TestProbeNeedsACheck(t *testing.T) {
	err := Probe{}.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "must specify at least one of") {
		t.Errorf("probe without checks: %v", err)
	}
}

// TestProbeFelix: -felix-ready and -felix-live ask the endpoint for felix's
// components only; a 503 is Calico's "felix is not ready" failure.
func TestProbeFelix(t *testing.T) {
	a := NewAggregator(nil)
	f := a.Register("felix/dataplane", time.Minute)
	a.Register("bgp", 0).SetReady(false, "BGP not established with 10.0.0.2")
	srv := httptest.NewServer(Handler(a))
	defer srv.Close()
	p := Probe{FelixReady: true, FelixLive: true, BaseURL: srv.URL, Threshold: 5 * time.Second}
	if err := p.Run(t.Context()); err == nil || err.Error() != "calico/node is not ready: felix is not ready: readiness probe reporting 503" {
		t.Errorf("felix not ready: %v", err)
	}
	f.SetReady(true, "")
	if err := p.Run(t.Context()); err != nil {
		t.Errorf("felix ready (BGP down is not felix's business): %v", err)
	}
}
