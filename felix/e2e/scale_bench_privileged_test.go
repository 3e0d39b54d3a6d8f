//go:build privileged && integration

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// BenchmarkPrivilegedScale drives the real felix binary (cmd/felix over a
// real etcd, programming a test namespace with the real iptables and
// ipset) at cluster scale (issue 15): the synthetic cluster with 1,000
// policies, 110 local endpoints and N remote ones (sizes from
// TABBY_SCALE_SIZES, default 5000,150000). Per size it reports the etcd
// load time, felix's start -> ready (/readiness), its RSS when ready, one
// remote endpoint added/removed -> its member in the kernel's ipset
// (p50/max of 20 each way), one policy changed -> its chain live (p50 of
// 20) and sustained churn (100 endpoint changes/s for 30 s: felix's CPU
// and the lag of the last change), with the load average next to them.
//
// Run: make bench-scale (go test -tags privileged,integration -run '^$'
// -bench PrivilegedScale -benchtime 1x -timeout 90m ./felix/e2e/);
// TABBY_FELIX_BIN runs a prebuilt felix binary instead of building one,
// TABBY_SCALE_STARTS sets the number of cold starts (default 3),
// TABBY_SCALE_ONLY_START=1 stops after them, TABBY_SCALE_MODES=nftables
// (or iptables) runs one dataplane mode only, TABBY_SCALE_FELIX_LOG=file
// keeps felix's Info log (a timeline of each start).
func BenchmarkPrivilegedScale(b *testing.B) {
	sizes := []int{5000, 150000}
	if s := os.Getenv("TABBY_SCALE_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				b.Fatalf("TABBY_SCALE_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	bin := buildFelix(b)
	if prebuilt := os.Getenv("TABBY_FELIX_BIN"); prebuilt != "" {
		bin = func() string { return prebuilt }
	}
	modes := dataplaneModes
	if m := os.Getenv("TABBY_SCALE_MODES"); m != "" {
		modes = strings.Split(m, ",")
	}
	for _, n := range sizes {
		for _, mode := range modes {
			b.Run(fmt.Sprintf("remote=%d/%s", n, mode), func(b *testing.B) {
				for b.Loop() {
					runScale(b, bin(), n, mode)
				}
			})
		}
	}
}

const (
	scalePolicies = 1000
	scaleLocal    = 110
	// isolation is the pause before each single change measured: longer
	// than felix's churn window (felix/daemon), so each is programmed as
	// an isolated change.
	isolation = 300 * time.Millisecond
)

func loadAvg() string {
	out, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(out))
	return strings.Join(f[:3], " ")
}

func runScale(b *testing.B, bin string, nRemote int, mode string) {
	ctx := context.Background()
	start := time.Now()
	e, c, n := loadScaleCluster(b, nRemote)
	load := time.Since(start)
	b.Logf("remote=%d: etcd loaded with %d objects in %v (load average %s)", nRemote, n, load.Round(time.Millisecond), loadAvg())

	// Cold starts, each programming a fresh namespace (TABBY_SCALE_STARTS,
	// default 3; the last one's felix is measured further on): start ->
	// ready (their median), the CPU felix (with its children) and etcd
	// used until then, RSS at ready and the peak.
	starts := 3
	if s := os.Getenv("TABBY_SCALE_STARTS"); s != "" {
		starts, _ = strconv.Atoi(s)
	}
	var readies []time.Duration
	var each []string
	for range starts - 1 {
		node := netnstest.NewNode(b)
		_, startReady, what, stop := coldStart(b, bin, e, node, mode)
		readies, each = append(readies, startReady), append(each, what)
		stop()
	}
	node := netnstest.NewNode(b)
	run := dataplane.ExecRunner{NetnsPath: node.Path()}
	pid, startReady, what, _ := coldStart(b, bin, e, node, mode)
	readies, each = append(readies, startReady), append(each, what)
	rss := procRSS(pid)
	if len(readies) > 1 {
		startReady = medianOf(readies)
		b.Logf("remote=%d: start -> ready over %d starts: p50 %v, min %v, max %v; each: %s (load average %s)", nRemote, len(readies),
			startReady.Round(time.Millisecond), slices.Min(readies).Round(time.Millisecond), slices.Max(readies).Round(time.Millisecond),
			strings.Join(each, "; "), loadAvg())
	} else {
		b.Logf("remote=%d: start -> ready %s (load average %s)", nRemote, what, loadAvg())
	}
	if os.Getenv("TABBY_SCALE_ONLY_START") != "" {
		b.ReportMetric(startReady.Seconds(), "start-ready-s")
		return
	}
	// Felix returns the start-up's memory to the system once in sync
	// (asynchronously): the resident size a second later, and the peak.
	time.Sleep(time.Second)
	settled := procRSS(pid)
	b.Logf("remote=%d: RSS 1 s after ready %d MiB, peak so far %d MiB", nRemote, settled>>20, procStatusKB(pid, "VmHWM:")>>10)

	// The sets a new endpoint of namespace ns10 with app a10 joins are
	// those holding an existing one of the same namespace and app.
	probe := scaleWEP(110, "x") // the first remote endpoint: ns10, app a10
	set := setHolding(b, run, ipOf(probe), mode)

	// One remote endpoint added / removed -> its member in the kernel.
	// Each change is isolated (isolation apart): felix batches changes
	// that come faster than ~40 a second (churn), which the churn
	// measurement below covers.
	var adds, dels []time.Duration
	for i := range 20 {
		time.Sleep(isolation)
		w := scaleWEP(3_000_000+i*100+10, "node2") // ns10, app a10
		ip := ipOf(w)
		t0 := time.Now()
		if _, err := c.Create(ctx, w); err != nil {
			b.Fatal(err)
		}
		waitMember(b, run, set, ip, true, mode)
		adds = append(adds, time.Since(t0))
		time.Sleep(isolation)
		t0 = time.Now()
		if _, err := c.Delete(ctx, datastore.KeyOf(w), datastore.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		waitMember(b, run, set, ip, false, mode)
		dels = append(dels, time.Since(t0))
	}
	b.Logf("remote=%d: endpoint added -> member in kernel (ipset %s) p50 %v max %v; removed p50 %v max %v (load average %s)", nRemote, set,
		medianOf(adds).Round(100*time.Microsecond), slices.Max(adds).Round(100*time.Microsecond),
		medianOf(dels).Round(100*time.Microsecond), slices.Max(dels).Round(100*time.Microsecond), loadAvg())

	// One policy changed -> its chain live.
	chain := rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Namespace: "ns0", Name: "pol0"})
	var pols []time.Duration
	for i := range 20 {
		time.Sleep(isolation)
		p := ct.SyntheticPolicy(0, i+1)
		cur, err := c.Get(ctx, datastore.KeyOf(p))
		if err != nil {
			b.Fatal(err)
		}
		p.ResourceVersion = cur.GetResourceVersion()
		want := fmt.Sprintf("%d", 9000+i+1)
		t0 := time.Now()
		if _, err := c.Update(ctx, p); err != nil {
			b.Fatal(err)
		}
		waitChain(b, run, chain, want, mode)
		pols = append(pols, time.Since(t0))
	}
	b.Logf("remote=%d: policy changed -> chain live p50 %v max %v (load average %s)", nRemote,
		medianOf(pols).Round(100*time.Microsecond), slices.Max(pols).Round(100*time.Microsecond), loadAvg())

	// Sustained churn: 100 endpoint changes per second for 30 s
	// (alternately a new remote endpoint and the deletion of one).
	cpu0 := procCPU(pid)
	t0 := time.Now()
	var last *v3.WorkloadEndpoint
	var lastDeleted bool
	tick := time.NewTicker(10 * time.Millisecond)
	var live []*v3.WorkloadEndpoint
	for i := 0; time.Since(t0) < 30*time.Second; i++ {
		<-tick.C
		if i%2 == 0 || len(live) == 0 {
			w := scaleWEP(4_000_000+i*100+10, "node3")
			if _, err := c.Create(ctx, w); err != nil {
				b.Fatal(err)
			}
			live = append(live, w)
			last, lastDeleted = w, false
		} else {
			w := live[0]
			live = live[1:]
			if _, err := c.Delete(ctx, datastore.KeyOf(w), datastore.DeleteOptions{}); err != nil {
				b.Fatal(err)
			}
			last, lastDeleted = w, true
		}
	}
	tick.Stop()
	sent := time.Now()
	waitMember(b, run, set, ipOf(last), !lastDeleted, mode)
	lag := time.Since(sent)
	churn := time.Since(t0)
	cpu := (procCPU(pid) - cpu0).Seconds() / churn.Seconds()
	b.Logf("remote=%d: churn 100/s for 30s: felix CPU %.2f cores, last change in kernel %v after it was written (load average %s)",
		nRemote, cpu, lag.Round(100*time.Microsecond), loadAvg())
	b.Logf("remote=%d: RSS after churn %d MiB", nRemote, procRSS(pid)>>20)

	b.ReportMetric(load.Seconds(), "load-s")
	b.ReportMetric(startReady.Seconds(), "start-ready-s")
	b.ReportMetric(float64(rss>>20), "rss-MiB")
	b.ReportMetric(float64(settled>>20), "rss-settled-MiB")
	b.ReportMetric(medianOf(adds).Seconds()*1000, "ep-add-p50-ms")
	b.ReportMetric(slices.Max(adds).Seconds()*1000, "ep-add-max-ms")
	b.ReportMetric(medianOf(dels).Seconds()*1000, "ep-del-p50-ms")
	b.ReportMetric(slices.Max(dels).Seconds()*1000, "ep-del-max-ms")
	b.ReportMetric(medianOf(pols).Seconds()*1000, "policy-p50-ms")
	b.ReportMetric(cpu, "churn-cpu-cores")
	b.ReportMetric(lag.Seconds()*1000, "churn-lag-ms")
}

// loadScaleCluster starts an etcd and loads it with the synthetic
// cluster: scalePolicies policies, scaleLocal local endpoints and nRemote
// remote ones (built in batches so that the test does not hold all of
// them); n is the number of objects written.
func loadScaleCluster(b *testing.B, nRemote int) (_ *testservers.Etcd, _ datastore.Client, n int) {
	ctx := context.Background()
	e := testservers.StartEtcd(b)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	objs := ct.Synthetic(scalePolicies, scaleLocal, 0)
	if err := createAll(ctx, c, objs); err != nil {
		b.Fatal(err)
	}
	for from := 0; from < nRemote; from += 10000 {
		var batch []any
		for k := scaleLocal + from; k < scaleLocal+min(from+10000, nRemote); k++ {
			batch = append(batch, scaleWEP(k, fmt.Sprintf("node%d", 2+k%50)))
		}
		if err := createAll(ctx, c, batch); err != nil {
			b.Fatal(err)
		}
	}
	return e, c, len(objs) + nRemote
}

// scaleWEP is endpoint k of the synthetic cluster (ct.Synthetic's) on
// node; k beyond the cluster's addresses gets addresses of its own.
func scaleWEP(k int, node string) *v3.WorkloadEndpoint {
	w := ct.WEP(fmt.Sprintf("ns%d", k%50), fmt.Sprintf("pod%d", k), node, fmt.Sprintf("cali%07x", k%(1<<28)),
		fmt.Sprintf("10.%d.%d.%d", 64+(k/65536)%128, (k/256)%256, k%256), map[string]string{"app": fmt.Sprintf("a%d", k%100)})
	w.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080}}
	return w
}

func ipOf(w *v3.WorkloadEndpoint) string { return strings.TrimSuffix(w.Spec.IPNetworks[0], "/32") }

// createAll writes objs to the store from 32 writers.
func createAll(ctx context.Context, c datastore.Client, objs []any) error {
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	work := make(chan v3.Resource)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				if _, err := c.Create(ctx, r); err != nil {
					select {
					case errs <- fmt.Errorf("creating %s: %w", datastore.KeyOf(r), err):
					default:
					}
				}
			}
		}()
	}
	for _, o := range objs {
		work <- o.(v3.Resource)
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// setHolding returns a cali40 hash:net ipset of the namespace holding ip.
func setHolding(b *testing.B, run dataplane.Runner, ip, mode string) string {
	if mode == "nftables" {
		return nftSetHolding(b, run, ip)
	}
	out, err := run.Run(context.Background(), "ipset", []string{"save"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "add" && f[2] == ip && strings.HasPrefix(f[1], "cali40") {
			return f[1]
		}
	}
	b.Fatalf("no ipset holds %s", ip)
	return ""
}

// waitMember waits until ip is (or is no longer) in set, probing about
// every millisecond with a netlink request in the node's namespace (a
// socket opened once per run: ipsetHas), not an ipset process.
func waitMember(b *testing.B, run dataplane.Runner, set, ip string, present bool, mode string) {
	deadline := time.Now().Add(60 * time.Second)
	has := ipsetHas
	if mode == "nftables" {
		has = nftSetHas
	}
	for {
		in, err := has(b, run, set, ip)
		if in == present {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s in %s: not %v within 60s (last probe: %v)", ip, set, present, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitChain(b *testing.B, run dataplane.Runner, chain, port, mode string) {
	deadline := time.Now().Add(60 * time.Second)
	if mode == "nftables" {
		waitNftChain(b, run, chain, port, deadline)
		return
	}
	name, args := "iptables", []string{"-w", "-S", chain}
	for {
		out, _ := run.Run(context.Background(), name, args, nil)
		if bytes.Contains(out, []byte(port)) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("chain %s without %s after 60s:\n%s", chain, port, out)
		}
		time.Sleep(time.Millisecond)
	}
}

// procRSS is the resident set size of pid in bytes.
func procRSS(pid int) int64 { return procStatusKB(pid, "VmRSS:") << 10 }

// procStatusKB is the field (e.g. "VmHWM:") of pid's /proc status, in kB.
func procStatusKB(pid int, field string) int64 {
	out, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb
		}
	}
	return 0
}

// procCPU is the user+system CPU time pid used so far (children
// included once they are waited for: the iptables/ipset processes).
func procCPU(pid int) time.Duration {
	out, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(out)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields after the command: state is f[0]; utime f[11], stime f[12],
	// cutime f[13], cstime f[14] (clock ticks, 100 per second).
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// coldStart starts felix over e programming node and waits until it is
// ready; it returns felix's pid, start -> ready, a description (that
// time, the CPU felix (with its children) and etcd used until then, RSS
// at ready and the peak) and a stop.
func coldStart(b *testing.B, bin string, e *testservers.Etcd, node ns.NetNS, mode string) (int, time.Duration, string, func()) {
	etcdCPU0 := procCPU(e.Pid())
	start := time.Now()
	pid, ready, stop := startFelixEtcd(b, bin, e.Endpoint(), node, mode)
	for !ready() {
		if time.Since(start) > 10*time.Minute {
			b.Fatal("felix not ready within 10 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	startReady := time.Since(start)
	what := fmt.Sprintf("%v (CPU until then: felix %.1f s, etcd %.1f s; RSS at ready %d MiB, peak %d MiB)",
		startReady.Round(time.Millisecond), procCPU(pid).Seconds(), (procCPU(e.Pid()) - etcdCPU0).Seconds(),
		procRSS(pid)>>20, procStatusKB(pid, "VmHWM:")>>10)
	return pid, startReady, what, stop
}

// startFelixEtcd runs the felix binary over etcd for ct.Node, programming
// node, and returns its pid, a probe of /readiness and a stop (also run
// at cleanup).
func startFelixEtcd(b *testing.B, bin, endpoint string, node ns.NetNS, mode string) (int, func() bool, func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	healthPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	var logs bytes.Buffer
	var mu sync.Mutex
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"FELIX_DATASTORETYPE=etcdv3", "FELIX_ETCDENDPOINTS="+endpoint, "FELIX_FELIXHOSTNAME="+ct.Node,
		"TABBY_FELIX_NETNS="+node.Path(), "FELIX_IPV6SUPPORT=false", "FELIX_NFTABLESMODE="+nftablesModeOf(mode),
		"FELIX_HEALTHENABLED=true", "FELIX_HEALTHHOST=127.0.0.1", "FELIX_HEALTHPORT="+strconv.Itoa(healthPort),
		"FELIX_PROMETHEUSMETRICSENABLED=false", "FELIX_LOGSEVERITYSCREEN=Warning",
		"FELIX_ENDPOINTSTATUSPATHPREFIX="+b.TempDir(), "TABBY_FELIX_MTU_FILE="+filepath.Join(b.TempDir(), "mtu"))
	var w io.Writer = &lockedWriter{mu: &mu, b: &logs}
	if path := os.Getenv("TABBY_SCALE_FELIX_LOG"); path != "" {
		// Felix's log at Info, for a timeline of its start.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = f.Close() })
		cmd.Env = append(cmd.Env, "FELIX_LOGSEVERITYSCREEN=Info")
		w = f
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	b.Cleanup(func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		if b.Failed() {
			b.Logf("cmd/felix output:\n%s", logs.String())
		}
	})
	hc := &http.Client{Timeout: time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/readiness", healthPort)
	return cmd.Process.Pid, func() bool {
		resp, err := hc.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	}, stop
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 1<<20 {
		return len(p), nil
	}
	return w.b.Write(p)
}

// waitNftChain waits until filter chain of felix's nftables table has a
// rule matching port, read over netlink (GETRULE of that chain only; an
// `nft list chain` process loads every set's elements first, seconds at
// 150,000 endpoints).
func waitNftChain(b *testing.B, run dataplane.Runner, chain, port string, deadline time.Time) {
	er, ok := run.(dataplane.ExecRunner)
	if !ok {
		b.Fatalf("waitNftChain needs an ExecRunner, not %T", run)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		b.Fatal(err)
	}
	want := binary.BigEndian.AppendUint16(nil, uint16(p))
	conn, closeConn, err := dataplane.NewNftConn(er.NetnsPath)
	if err != nil {
		b.Fatal(err)
	}
	defer closeConn()
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: rules.NftTable}
	ch := &nftables.Chain{Table: table, Name: rules.NftChainName("filter", chain)}
	for {
		rs, err := conn.GetRules(table, ch)
		for _, r := range rs {
			for _, e := range r.Exprs {
				switch e := e.(type) {
				case *expr.Cmp:
					if bytes.Equal(e.Data, want) {
						return
					}
				case *expr.Range:
					if bytes.Equal(e.FromData, want) {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("chain %s without port %s after 60s (last read: %v)", chain, port, err)
		}
		time.Sleep(time.Millisecond)
	}
}
