package daemon

import (
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/rules"
)

// recordingRoutes is a RouteManager that keeps the clusters it is given.
type recordingRoutes struct {
	clusters []*infra.Cluster
}

func (r *recordingRoutes) OnStatusUpdated(datastore.SyncStatus) {}
func (r *recordingRoutes) OnUpdates([]datastore.Update)         {}
func (r *recordingRoutes) SetCluster(c *infra.Cluster)          { r.clusters = append(r.clusters, c) }

// TestRulesAndRoutesShareOneReading: the route manager is handed the very
// Cluster the tunnel rules are rendered from; a node whose BGP address is
// a bare IP is in the VXLAN hosts the rules accept; a node address that
// cannot be read is logged once and counted (felix_infra_bad_input_total,
// felix_infra_bad_input), and the count goes back to 0 when it is fixed;
// a change of neither pools nor nodes hands over no new cluster, nor does
// a Node change of what felix does not read.
func TestRulesAndRoutesShareOneReading(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	dp := &recordingDataplane{Dataplane: dataplane.New(dataplane.Config{Runner: fake.NewKernel(), V4: dataplane.BackendDefaultV4, Logger: log})}
	rm := &recordingRoutes{}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	d := New(Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log, Routes: rm, Metrics: m})
	ups := func(rs ...v3.Resource) []datastore.Update {
		var out []datastore.Update
		for _, r := range rs {
			out = append(out, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
		}
		return out
	}
	d.OnUpdates(ups(testPool("p", "10.70.0.0/16", false, v3.IPIPModeNever, v3.VXLANModeAlways),
		testNode("bare", "172.30.1.11", "10.70.1.1"), testNode("cidr", "172.30.1.12/24", "10.70.2.1"),
		testNode("broken", "172.30.1.300/24", "10.70.3.1")))
	d.OnStatusUpdated(datastore.StatusInSync)
	if !d.Recompute() {
		t.Fatal("not computed")
	}
	if len(rm.clusters) != 1 || rm.clusters[0] != d.calc.cluster {
		t.Fatalf("the route manager got %d clusters, want the one the rules use", len(rm.clusters))
	}
	want := []netip.Addr{netip.MustParseAddr("172.30.1.11"), netip.MustParseAddr("172.30.1.12")}
	if got := d.calc.tunnels.VXLANHosts; !slices.Equal(got, want) {
		t.Errorf("VXLAN hosts %v, want %v (the bare address included)", got, want)
	}
	if got := testutil.ToFloat64(m.InfraBadInput.WithLabelValues(v3.KindNode, "bgp.ipv4Address")); got != 1 {
		t.Errorf("felix_infra_bad_input_total{Node,bgp.ipv4Address} = %v, want 1", got)
	}
	if n := strings.Count(logs.String(), "cannot read a field"); n != 1 {
		t.Errorf("the unreadable address logged %d times, want once:\n%s", n, logs.String())
	}
	d.OnUpdates(ups(ct.NSProfile("x", nil)))
	d.Recompute()
	if len(rm.clusters) != 1 {
		t.Errorf("a profile change handed over a new cluster")
	}
	relabelled := testNode("bare", "172.30.1.11", "10.70.1.1")
	relabelled.Labels = map[string]string{"rack": "r2"}
	handed := dp.calls
	d.OnUpdates(ups(relabelled))
	d.Recompute()
	if len(rm.clusters) != 1 || dp.calls != handed {
		t.Errorf("a Node change felix does not read (a label): %d clusters, %d more rulesets; want 1 and none", len(rm.clusters), dp.calls-handed)
	}
	d.OnUpdates(ups(testNode("broken", "172.30.1.13/24", "10.70.3.1")))
	d.Recompute()
	if len(rm.clusters) != 2 || testutil.ToFloat64(m.InfraBadInputNow) != 0 || len(d.calc.tunnels.VXLANHosts) != 3 {
		t.Errorf("after the fix: %d clusters, felix_infra_bad_input %v, VXLAN hosts %v",
			len(rm.clusters), testutil.ToFloat64(m.InfraBadInputNow), d.calc.tunnels.VXLANHosts)
	}
}
