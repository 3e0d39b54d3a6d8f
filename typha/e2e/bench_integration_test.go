//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tabbynet/tabby/confd"
	confdagent "github.com/tabbynet/tabby/confd/agent"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	felixdaemon "github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/typha/discovery"
)

// BenchmarkTyphaFanout (make bench-typha): simulated nodes, each a felix
// and a confd syncer client (their own code: felix's daemon.NewSyncer /
// NewTyphaSyncer, confd's kdd syncer / agent.TyphaSyncer) delivering to a
// recorder, against one real kube-apiserver; first through 3 Typha
// processes, then direct, in the same run. TABBY_BENCH_TYPHA_NODES (1000)
// and TABBY_BENCH_TYPHA_DIRECT (1000: ~22,000 watches, 2.5 GiB and a
// minute of CPU in the API server; lower it on a busy machine) size the
// two.
func BenchmarkTyphaFanout(b *testing.B) {
	for range b.N {
		runFanout(b, envInt("TABBY_BENCH_TYPHA_NODES", 1000), envInt("TABBY_BENCH_TYPHA_DIRECT", 1000))
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// recorder is one simulated node's syncer consumer.
type recorder struct {
	start   time.Time
	inSync  atomic.Int64 // nanoseconds from start to InSync; 0 before
	armed   atomic.Bool
	changed atomic.Int64 // unix nanos the watched policy's change arrived
	watch   string
}

func (r *recorder) OnStatusUpdated(s datastore.SyncStatus) {
	if s == datastore.StatusInSync && r.inSync.Load() == 0 {
		r.inSync.Store(int64(time.Since(r.start)) + 1)
	}
}

func (r *recorder) OnUpdates(ups []datastore.Update) {
	if !r.armed.Load() {
		return
	}
	for _, u := range ups {
		if u.Key.Name == r.watch && u.Type == datastore.EventModified && r.changed.Load() == 0 {
			r.changed.Store(time.Now().UnixNano())
		}
	}
}

// fleet is the simulated nodes of one phase.
type fleet struct {
	felix, bgp []*recorder
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

// starter makes one node's felix and confd syncers delivering to the
// recorders.
type starter func(name string, felix, bgp *recorder) (datastore.Syncer, datastore.Syncer, error)

func startFleet(b *testing.B, n int, start starter) *fleet {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{cancel: cancel}
	for i := range n {
		fr, br := &recorder{start: time.Now(), watch: "gnp-0"}, &recorder{start: time.Now()}
		fs, cs, err := start(nodeName(i), fr, br)
		if err != nil {
			b.Fatal(err)
		}
		f.wg.Add(2)
		go func() { defer f.wg.Done(); fs.Run(ctx) }()
		go func() { defer f.wg.Done(); cs.Run(ctx) }()
		f.felix, f.bgp = append(f.felix, fr), append(f.bgp, br)
	}
	return f
}

func (f *fleet) stop() { f.cancel(); f.wg.Wait() }

func (f *fleet) allInSync() bool {
	for _, r := range slices.Concat(f.felix, f.bgp) {
		if r.inSync.Load() == 0 {
			return false
		}
	}
	return true
}

// phase is what one phase measured.
type phase struct {
	name                 string
	nodes                int
	watches, watchesIdle float64
	apiCPU               float64 // API server CPU seconds over the phase
	apiRSS               int64   // API server RSS at the end, bytes
	allInSync            time.Duration
	p50, p99, pmax       time.Duration
	newClient            time.Duration // p50 of 5
	typhaPerConn         float64       // bytes per connection (Typha phase)
	snaps                string        // the Typhas' binary snapshots (Typha phase)
}

func runFanout(b *testing.B, nTypha, nDirect int) {
	c := startCluster(b)
	c.addNodes(b, 50)
	c.addPolicies(b, 50)
	shared := c.client(b) // one client for every simulated node (see README)

	// Through 3 Typhas.
	typhas := []*typha{startTypha(b, c, "typha-0"), startTypha(b, c, "typha-1"), startTypha(b, c, "typha-2")}
	dial := c.publish(b, typhas...)
	settings := discovery.Settings{K8sServiceName: "calico-typha", K8sNamespace: "kube-system", Dial: dial}
	viaTypha := func(name string, fr, br *recorder) (datastore.Syncer, datastore.Syncer, error) {
		fs, err := felixdaemon.NewTyphaSyncer(shared, settings, name, quietLog(), fr)
		if err != nil {
			return nil, nil, err
		}
		cs, err := confdagent.TyphaSyncer(shared, settings, name, quietLog(), br)
		return fs, cs, err
	}
	time.Sleep(2 * time.Second)
	idle := apiWatches(b, c)
	rssBefore := typhaRSS(typhas)
	tp := measure(b, c, "3 Typhas", nTypha, viaTypha, func(p *phase) {
		p.watchesIdle = idle
		var conns float64
		for _, ty := range typhas {
			conns += ty.metric(b, "typha_connections_streaming")
		}
		p.typhaPerConn = float64(typhaRSS(typhas)-rssBefore) / conns
		var gen, reused float64
		for _, ty := range typhas {
			gen += ty.metric(b, "typha_snapshots_generated")
			reused += ty.metric(b, "typha_snapshots_reused")
		}
		raw, err := scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", typhas[0].metricsPort), "typha_snapshot_raw_bytes")
		if err != nil {
			b.Fatal(err)
		}
		zipped, _ := scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", typhas[0].metricsPort), "typha_snapshot_compressed_bytes")
		p.snaps = fmt.Sprintf("compressed snapshots encoded %.0f times, reused %.0f; snapshot bytes (felix+bgp) %.0f, %.0f sent", gen, reused, raw, zipped)
	})
	for _, ty := range typhas {
		ty.Kill()
	}

	// Direct: every node's own informers.
	direct := func(_ string, fr, br *recorder) (datastore.Syncer, datastore.Syncer, error) {
		return felixdaemon.NewSyncer(shared, fr), kdd.NewSyncer(shared, confd.Kinds, br), nil
	}
	time.Sleep(2 * time.Second)
	idle = apiWatches(b, c)
	dp := measure(b, c, "direct", nDirect, direct, func(p *phase) { p.watchesIdle = idle })

	fmt.Printf("Typha fan-out (load average %s), %d Nodes, 50 GlobalNetworkPolicies; each node a felix and a confd syncer client:\n", loadAvg(), 50)
	for _, p := range []phase{tp, dp} {
		fmt.Printf("  %-9s nodes %5d: API server watches %.0f (%.0f before the nodes), API server CPU %.1f s, RSS %d MiB; all in sync %s; policy change to every felix p50 %s p99 %s max %s; new node in sync %s",
			p.name, p.nodes, p.watches, p.watchesIdle, p.apiCPU, p.apiRSS>>20, p.allInSync.Round(time.Millisecond),
			p.p50.Round(time.Millisecond), p.p99.Round(time.Millisecond), p.pmax.Round(time.Millisecond), p.newClient.Round(time.Millisecond))
		if p.typhaPerConn > 0 {
			fmt.Printf("; Typha memory per connection %.0f KiB; %s", p.typhaPerConn/1024, p.snaps)
		}
		fmt.Println()
	}
	b.ReportMetric(tp.watches, "typha-watches")
	b.ReportMetric(dp.watches, "direct-watches")
	b.ReportMetric(float64(tp.p99.Milliseconds()), "typha-p99-ms")
	b.ReportMetric(tp.typhaPerConn/1024, "typha-KiB/conn")
}

// measure runs one phase: n nodes started and in sync, a policy change
// timed to every felix, five new nodes timed to in-sync.
func measure(b *testing.B, c *cluster, name string, n int, start starter, extra func(*phase)) phase {
	b.Helper()
	p := phase{name: name, nodes: n}
	cpu0 := procCPU(c.Pid())
	t0 := time.Now()
	f := startFleet(b, n, start)
	defer f.stop()
	waitUntil(b, name+": every node in sync", 10*time.Minute, f.allInSync)
	p.allInSync = time.Since(t0)
	time.Sleep(3 * time.Second)
	p.watches = apiWatches(b, c)
	if extra != nil {
		extra(&p)
	}

	for _, r := range f.felix {
		r.armed.Store(true)
	}
	order := float64(time.Now().UnixNano() % 1000)
	changed := time.Now()
	if _, err := c.ds.Update(context.Background(), withOrder(b, c, "gnp-0", order)); err != nil {
		b.Fatal(err)
	}
	waitUntil(b, name+": the policy change at every felix", 2*time.Minute, func() bool {
		for _, r := range f.felix {
			if r.changed.Load() == 0 {
				return false
			}
		}
		return true
	})
	var lat []time.Duration
	for _, r := range f.felix {
		lat = append(lat, time.Duration(r.changed.Load()-changed.UnixNano()))
	}
	slices.Sort(lat)
	p.p50, p.p99, p.pmax = lat[len(lat)/2], lat[(len(lat)*99)/100], lat[len(lat)-1]

	var fresh []time.Duration
	for range 5 {
		g := startFleet(b, 1, start)
		waitUntil(b, name+": a new node in sync", time.Minute, g.allInSync)
		fresh = append(fresh, time.Duration(max(g.felix[0].inSync.Load(), g.bgp[0].inSync.Load())))
		g.stop()
	}
	slices.Sort(fresh)
	p.newClient = fresh[2]
	p.apiCPU = procCPU(c.Pid()) - cpu0
	p.apiRSS = procRSS(c.Pid())
	return p
}

// apiWatches is the API server's count of open watches.
func apiWatches(b *testing.B, c *cluster) float64 {
	b.Helper()
	raw, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return sumMetric(string(raw), "apiserver_longrunning_requests", `verb="WATCH"`)
}

func typhaRSS(ts []*typha) int64 {
	var sum int64
	for _, t := range ts {
		sum += procRSS(t.Pid())
	}
	return sum
}

// procCPU is a process's user+system CPU seconds.
func procCPU(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// procRSS is a process's resident memory in bytes.
func procRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}
