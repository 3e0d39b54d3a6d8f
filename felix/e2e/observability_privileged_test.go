//go:build privileged && integration

package e2e

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/internal/testservers"
)

// dashboardNotApplicable are the metric prefixes of the published
// dashboard's panels for features Tabby refuses (see felix/config): the
// eBPF dataplane; and flow logs, off by default (NFLOG aggregation, the
// flow collector: their metrics exist only with FlowLogsLocalReporter
// Enabled, see felix/collector).
var dashboardNotApplicable = []string{"felix_bpf_", "felix_nflog_", "felix_collector_"}

// dashboardMetrics reads the fixture of Calico's felix dashboard and
// returns, per panel target, the metric names its expression reads.
func dashboardMetrics(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("testdata/calico-felix-dashboard.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	name := regexp.MustCompile(`\b(felix|go|process)_[a-z0-9_]+`)
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") || sc.Text() == "" {
			continue
		}
		title, expr, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("bad fixture line %q", sc.Text())
		}
		out[title+": "+expr] = name.FindAllString(expr, -1)
	}
	if len(out) < 30 {
		t.Fatalf("fixture has %d panel targets", len(out))
	}
	return out
}

// TestPrivilegedFelixDashboardAndHealth runs the real felix and checks
// that every metric panel of Calico's published felix dashboard has a
// series on its /metrics (panels of refused features excepted), then
// freezes etcd (SIGSTOP: connections stay open, nothing answers):
// readiness turns 503 naming the datastore and the log says so at ERROR
// while it lasts; thawed, felix is ready again.
func TestPrivilegedFelixDashboardAndHealth(t *testing.T) {
	e := testservers.StartEtcd(t)
	nodeNS := newNode(t)
	f := startRealFelix(t, e.Endpoint(), nodeNS, nil)
	eventually(t, 30*time.Second, "felix ready", f.ready)
	_, body := get(f.metrics + "/metrics")
	series := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		n, _, _ := strings.Cut(l, " ")
		n, _, _ = strings.Cut(n, "{")
		series[n] = true
	}
	covered := 0
panels:
	for panel, metrics := range dashboardMetrics(t) {
		for _, m := range metrics {
			for _, p := range dashboardNotApplicable {
				if strings.HasPrefix(m, p) {
					continue panels
				}
			}
		}
		for _, m := range metrics {
			if !series[m] {
				t.Errorf("panel %q: no series %s", panel, m)
			}
		}
		covered++
	}
	t.Logf("%d dashboard panel targets have their series", covered)

	t.Cleanup(e.Thaw) // before the server's own cleanup stops it
	e.Freeze()
	eventually(t, 60*time.Second, "not ready while etcd is frozen", func() bool {
		code, why := get(f.health + "/readiness")
		return code == http.StatusServiceUnavailable && strings.Contains(why, "datastore")
	})
	if !regexp.MustCompile(`\[ERROR\]\[\d+\] felix/health\.go \d+: datastore unreachable `).MatchString(f.logs.String()) {
		t.Errorf("no ERROR while the datastore is unreachable:\n%s", f.logs.String())
	}
	if code, _ := get(f.health + "/liveness"); code != http.StatusNoContent {
		t.Errorf("liveness %d while only the datastore is down", code)
	}
	e.Thaw()
	eventually(t, 60*time.Second, "ready again after etcd thawed", f.ready)
	if !strings.Contains(f.logs.String(), "datastore reachable again") {
		t.Error("recovery not logged")
	}
}

// TestPrivilegedFelixStalledLoopFailsLiveness: with Calico's
// DebugSimulateCalcGraphHangAfter / DebugSimulateDataplaneHangAfter, the
// real felix's calculation (on the next change) or dataplane loop (on the
// next refresh) gets stuck; /liveness turns 503 naming the loop once it
// has been stuck past DataplaneWatchdogTimeout, and says so at ERROR.
func TestPrivilegedFelixStalledLoopFailsLiveness(t *testing.T) {
	for _, c := range []struct{ loop, hangVar string }{
		{"calculation", "FELIX_DEBUGSIMULATECALCGRAPHHANGAFTER"},
		{"dataplane", "FELIX_DEBUGSIMULATEDATAPLANEHANGAFTER"},
	} {
		t.Run(c.loop, func(t *testing.T) {
			e := testservers.StartEtcd(t)
			client := etcdClient(t, e)
			nodeNS := newNode(t)
			f := startRealFelix(t, e.Endpoint(), nodeNS, map[string]string{
				c.hangVar: "3", "FELIX_DATAPLANEWATCHDOGTIMEOUT": "2", "FELIX_IPTABLESREFRESHINTERVAL": "1",
			})
			eventually(t, 30*time.Second, "felix ready", f.ready)
			if code, _ := get(f.health + "/liveness"); code != http.StatusNoContent {
				t.Fatalf("liveness %d before the hang", code)
			}
			n := 0
			eventually(t, 60*time.Second, "liveness fails naming the "+c.loop+" loop", func() bool {
				n++ // a change for the calculation to take up
				putFelixConfig(t, client, "default", v3.FelixConfigurationSpec{LogPrefix: "p" + strconv.Itoa(n)})
				code, why := get(f.health + "/liveness")
				return code == http.StatusServiceUnavailable && strings.Contains(why, "the "+c.loop+" loop has been stuck")
			})
			if !regexp.MustCompile(`\[ERROR\]\[\d+\] felix/health\.go \d+: felix is not live `).MatchString(f.logs.String()) {
				t.Errorf("the stall was not logged:\n%s", f.logs.String())
			}
		})
	}
}
