//go:build privileged && integration

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/tabbynet/tabby/internal/testlog"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/felix/agent"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/lib/calicolog"
)

// realFelix is agent.Run (what cmd/felix and calico-node run) for node
// over a real etcd, programming nodeNS.
type realFelix struct {
	done                  chan error
	stop                  context.CancelFunc
	logs                  *testlog.Buffer
	health, metrics       string // base URLs
	logFile               string
	healthPort, metricsPt int
	restarts              atomic.Int32
}

func freeLoopbackPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRealFelix runs felix with the common settings of these tests plus
// vars (FELIX_* and others), until the test ends.
func startRealFelix(t testing.TB, etcdURL string, nodeNS ns.NetNS, vars map[string]string) *realFelix {
	t.Helper()
	return startRealFelixWith(t, etcdURL, nodeNS, vars, false)
}

// startRealFelixWith is startRealFelix; with supervise, felix is started
// again whenever it stops with agent.ErrConfigChanged (as calico-node
// restarts it), counted in restarts.
func startRealFelixWith(t testing.TB, etcdURL string, nodeNS ns.NetNS, vars map[string]string, supervise bool) *realFelix {
	t.Helper()
	f := &realFelix{done: make(chan error, 1), logs: &testlog.Buffer{}, logFile: filepath.Join(t.TempDir(), "felix.log"),
		healthPort: freeLoopbackPort(t), metricsPt: freeLoopbackPort(t)}
	f.health = "http://127.0.0.1:" + strconv.Itoa(f.healthPort)
	f.metrics = "http://127.0.0.1:" + strconv.Itoa(f.metricsPt)
	all := map[string]string{
		"FELIX_FELIXHOSTNAME": node, "FELIX_DATASTORETYPE": "etcdv3", "FELIX_ETCDENDPOINTS": etcdURL,
		"TABBY_FELIX_NETNS": nodeNS.Path(), "TABBY_FELIX_MTU_FILE": "none", "FELIX_ENDPOINTSTATUSPATHPREFIX": "none",
		"FELIX_IPV6SUPPORT": "false", "FELIX_HEALTHENABLED": "true", "FELIX_HEALTHHOST": "127.0.0.1",
		"FELIX_HEALTHPORT": strconv.Itoa(f.healthPort), "FELIX_PROMETHEUSMETRICSENABLED": "true",
		"FELIX_PROMETHEUSMETRICSHOST": "127.0.0.1", "FELIX_PROMETHEUSMETRICSPORT": strconv.Itoa(f.metricsPt),
		"FELIX_LOGFILEPATH": f.logFile,
	}
	for k, v := range vars {
		all[k] = v
	}
	var environ []string
	for k, v := range all {
		environ = append(environ, k+"="+v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	cfgFile := filepath.Join(t.TempDir(), "felix.cfg")
	go func() {
		for {
			err := agent.Run(ctx, agent.Options{Getenv: func(k string) string { return all[k] }, Environ: func() []string { return environ },
				ConfigFile: cfgFile, Stderr: f.logs})
			if supervise && errors.Is(err, agent.ErrConfigChanged) && ctx.Err() == nil {
				f.restarts.Add(1)
				continue
			}
			f.done <- err
			return
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.done:
		case <-time.After(30 * time.Second):
			t.Error("felix did not stop")
		}
	})
	return f
}

// get returns the status and body of url ("" and 0 when unreachable).
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (f *realFelix) ready() bool {
	code, _ := get(f.health + "/readiness")
	return code == http.StatusNoContent
}

// metric returns the value of one series ("name{labels}" as exposed), or
// "" when absent.
func (f *realFelix) metric(series string) string {
	_, body := get(f.metrics + "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

func etcdClient(t *testing.T, e *testservers.Etcd) datastore.Client {
	t.Helper()
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func nsRun(t testing.TB, n ns.NetNS, name string, args ...string) string {
	t.Helper()
	out, err := dataplane.ExecRunner{NetnsPath: n.Path()}.Run(context.Background(), name, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func putFelixConfig(t testing.TB, c datastore.Client, name string, spec v3.FelixConfigurationSpec) {
	t.Helper()
	ctx := context.Background()
	fc := &v3.FelixConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindFelixConfiguration, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	old, err := c.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: name})
	switch {
	case errors.Is(err, datastore.ErrNotFound):
		_, err = c.Create(ctx, fc)
	case err == nil:
		fc.ResourceVersion = old.GetResourceVersion()
		_, err = c.Update(ctx, fc)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestPrivilegedFelixSettingsHonoured drives the real felix with settings
// of each honoured kind and checks their effects: iptablesBackend Legacy
// (felix's chains in iptables-legacy, the stale nft ones of another felix
// removed), chainInsertMode Append (felix's hook after a rule already in
// INPUT), iptablesMarkMask (the accept mark is the mask's lowest bit),
// healthPort/prometheusMetricsPort (they answer), logFilePath (the file
// fills), logSeverityScreen Debug then Trace set live through the global
// FelixConfiguration, and a start-time setting (healthPort) changed in
// the node's FelixConfiguration stops felix for a restart.
func TestPrivilegedFelixSettingsHonoured(t *testing.T) {
	e := testservers.StartEtcd(t)
	c := etcdClient(t, e)
	nodeNS := newNode(t)
	nsRun(t, nodeNS, "iptables-legacy", "-A", "INPUT", "-p", "tcp", "--dport", "7", "-j", "ACCEPT")
	// A stale felix chain in the other backend (nft), hooked into FORWARD.
	nsRun(t, nodeNS, "iptables-nft", "-N", "cali-FORWARD")
	nsRun(t, nodeNS, "iptables-nft", "-A", "FORWARD", "-j", "cali-FORWARD")

	f := startRealFelix(t, e.Endpoint(), nodeNS, map[string]string{
		"FELIX_IPTABLESBACKEND": "Legacy", "FELIX_CHAININSERTMODE": "Append", "FELIX_IPTABLESMARKMASK": "0xf00000",
	})
	eventually(t, 30*time.Second, "felix ready on its health port", f.ready)
	legacy := nsRun(t, nodeNS, "iptables-legacy-save", "-t", "filter")
	if !strings.Contains(legacy, ":cali-INPUT") {
		t.Fatalf("felix's chains are not in iptables-legacy:\n%s", legacy)
	}
	var input []string
	for _, l := range strings.Split(legacy, "\n") {
		if strings.HasPrefix(l, "-A INPUT ") {
			input = append(input, l)
		}
	}
	if len(input) != 2 || !strings.Contains(input[0], "--dport 7") || !strings.Contains(input[1], "cali-INPUT") {
		t.Errorf("ChainInsertMode Append: INPUT is %q, want the existing rule then felix's hook", input)
	}
	if !strings.Contains(legacy, "0x100000/0x100000") || strings.Contains(legacy, "0x10000/0x10000") {
		t.Errorf("IptablesMarkMask 0xf00000: accept mark 0x100000 not used:\n%s", legacy)
	}
	if nft := nsRun(t, nodeNS, "iptables-nft-save", "-t", "filter"); strings.Contains(nft, "cali-") {
		t.Errorf("the other backend's (nft) felix rules were not removed:\n%s", nft)
	}
	if v := f.metric("felix_iptables_restore_calls"); v == "" || v == "0" {
		t.Errorf("Prometheus endpoint: felix_iptables_restore_calls = %q", v)
	}
	if b, _ := os.ReadFile(f.logFile); !strings.Contains(string(b), "felix starting") {
		t.Errorf("log file %s lacks felix's log: %q", f.logFile, b)
	}
	if strings.Contains(f.logs.String(), "[DEBUG]") {
		t.Fatal("debug lines at Info: the test proves nothing")
	}

	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{LogSeverityScreen: "Debug"})
	defer func() {
		if t.Failed() {
			t.Log(f.logs.String())
		}
	}()
	eventually(t, 20*time.Second, "debug lines after logSeverityScreen: Debug", func() bool {
		return strings.Contains(f.logs.String(), "[DEBUG]")
	})
	if strings.Contains(f.logs.String(), "[TRACE]") {
		t.Error("trace lines at Debug")
	}
	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{LogSeverityScreen: "Trace"})
	// Any update is traced once Trace is on: write one more.
	eventually(t, 20*time.Second, "trace lines after logSeverityScreen: Trace", func() bool {
		putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{LogSeverityScreen: "Trace", LogPrefix: fmt.Sprint(time.Now().UnixNano())})
		return strings.Contains(f.logs.String(), "[TRACE]")
	})
	select {
	case err := <-f.done:
		t.Fatalf("felix stopped on a live setting: %v", err)
	default:
	}

	// The environment wins over the datastore: the metrics port set by
	// FELIX_PROMETHEUSMETRICSPORT does not change, so no restart.
	newPort := freeLoopbackPort(t)
	putFelixConfig(t, c, v3.FelixConfigurationNamePrefix+node, v3.FelixConfigurationSpec{PrometheusMetricsPort: &newPort})
	putFelixConfig(t, c, v3.FelixConfigurationNamePrefix+node, v3.FelixConfigurationSpec{PrometheusMetricsPort: &newPort,
		RouteRefreshInterval: &metav1.Duration{Duration: 30 * time.Second}})
	select {
	case err := <-f.done:
		f.done <- err // for the cleanup
		if !errors.Is(err, agent.ErrConfigChanged) || !strings.Contains(err.Error(), "RouteRefreshInterval") ||
			strings.Contains(err.Error(), "PrometheusMetricsPort") {
			t.Errorf("felix stopped with %v, want ErrConfigChanged naming RouteRefreshInterval only", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("felix did not stop for a restart after routeRefreshInterval changed")
	}
}

// TestPrivilegedFelixSettingsRefused: refused settings (a debug log filter
// from the environment) are logged at ERROR with what runs instead and exported as
// tabby_felix_config_problems, while felix programs iptables and is
// ready; a refused value set later is reported the same way without a
// restart. A security setting felix cannot honour (bpfEnabled)
// makes it not ready, naming the setting in /readiness, the log and
// tabby_felix_security_settings_unhonoured, until it is removed.
func TestPrivilegedFelixSettingsRefused(t *testing.T) {
	e := testservers.StartEtcd(t)
	c := etcdClient(t, e)
	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{BPFEnabled: new(true)})
	nodeNS := newNode(t)
	f := startRealFelix(t, e.Endpoint(), nodeNS, map[string]string{"FELIX_LOGDEBUGFILENAMEREGEX": "calc",
		"FELIX_USAGEREPORTINGENABLED": "false"})
	defer func() {
		if t.Failed() {
			t.Log(f.logs.String())
		}
	}()
	eventually(t, 30*time.Second, "felix programs iptables", func() bool {
		return strings.Contains(nsRun(t, nodeNS, "iptables-save", "-t", "filter"), ":cali-INPUT")
	})
	eventually(t, 10*time.Second, "readiness names bpfEnabled", func() bool {
		code, body := get(f.health + "/readiness")
		return code == http.StatusServiceUnavailable &&
			strings.Contains(body, "settings: BPFEnabled=true (FelixConfiguration default) cannot be honoured: the eBPF dataplane is not implemented")
	})
	if v := f.metric("tabby_felix_security_settings_unhonoured"); v != "1" {
		t.Errorf("tabby_felix_security_settings_unhonoured = %q, want 1", v)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "felix is not ready: a security setting cannot be honoured") || !strings.Contains(logs, "BPFEnabled=true") {
		t.Errorf("no ERROR saying why felix is not ready")
	}
	for _, want := range []struct{ setting, source, says string }{
		{"LogDebugFilenameRegex", "environment", "cannot be filtered by source file"},
		{"BPFEnabled", "FelixConfiguration default", "eBPF dataplane is not implemented"},
	} {
		if !regexp.MustCompile(`\[ERROR\]\[\d+\] felix/\S+ \d+: felix setting refused .*reason="[^"]*` + want.says + `.*setting="` + want.setting + `"`).MatchString(logs) {
			t.Errorf("no ERROR refusing %s saying %q", want.setting, want.says)
		}
		if !f.hasProblem(want.setting, want.source, "refused") {
			t.Errorf("tabby_felix_config_problems has no %s/%s", want.setting, want.source)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(logs, "\n"), "\n") {
		if !calicolog.LinePattern().MatchString(l) {
			t.Errorf("not Calico's log line format: %q", l)
		}
	}
	if strings.Contains(logs, `setting="UsageReportingEnabled"`) {
		t.Error("usageReportingEnabled=false (what Tabby does) was reported")
	}

	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{XDPEnabled: new(true)})
	eventually(t, 20*time.Second, "ready once bpfEnabled is removed", f.ready)
	eventually(t, 20*time.Second, "xdpEnabled set later refused", func() bool {
		return f.hasProblem("XDPEnabled", "FelixConfiguration default", "refused") &&
			strings.Contains(f.logs.String(), `setting="XDPEnabled"`)
	})
	if v := f.metric("tabby_felix_security_settings_unhonoured"); v != "0" {
		t.Errorf("tabby_felix_security_settings_unhonoured = %q after removal, want 0", v)
	}
	select {
	case err := <-f.done:
		t.Fatalf("felix stopped on a refused setting: %v", err)
	default:
	}
}

// TestPrivilegedFelixReadinessNamesCause: /readiness names the failing
// part and its cause. An IPIP pool on this machine's kernel (no ipip
// module: tunl0 cannot be created) makes felix not ready naming ipip once
// route syncs have failed past the grace period, while the rest is ok;
// with etcd stopped it names the datastore, not the dataplane.
func TestPrivilegedFelixReadinessNamesCause(t *testing.T) {
	e := testservers.StartEtcd(t)
	c := etcdClient(t, e)
	ctx := context.Background()
	nodeRes := &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: "projectcalico.org/v3"}, ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: "192.168.200.1/24", IPv4IPIPTunnelAddr: "10.65.0.1"}}}
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: "projectcalico.org/v3"}, ObjectMeta: metav1.ObjectMeta{Name: "ipip"},
		Spec: v3.IPPoolSpec{CIDR: "10.65.0.0/16", BlockSize: 26, IPIPMode: v3.IPIPModeAlways, VXLANMode: v3.VXLANModeNever, NodeSelector: "all()"}}
	for _, r := range []v3.Resource{nodeRes, pool} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	nodeNS := newNode(t)
	f := startRealFelix(t, e.Endpoint(), nodeNS, nil)
	defer func() {
		if t.Failed() {
			t.Log(f.logs.String())
		}
	}()
	var body string
	eventually(t, 40*time.Second, "readiness names ipip", func() bool {
		var code int
		code, body = get(f.health + "/readiness")
		return code == http.StatusServiceUnavailable && regexp.MustCompile(`routes: route sync failing for \d+s: .*tunl0.*ipip`).MatchString(body)
	})
	if strings.Contains(body, "datastore:") || strings.Contains(body, "settings:") {
		t.Errorf("readiness blames more than the routes: %q", body)
	}

	// The pool goes: felix is ready again; then etcd stops.
	if _, err := c.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "ipip"}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ready without the IPIP pool", f.ready)
	e.Stop()
	eventually(t, 40*time.Second, "readiness names the datastore", func() bool {
		var code int
		code, body = get(f.health + "/readiness")
		return code == http.StatusServiceUnavailable && strings.HasPrefix(body, "datastore: unreachable: ")
	})
	if strings.Contains(body, "dataplane:") {
		t.Errorf("readiness blames the dataplane with etcd stopped: %q", body)
	}
}

func (f *realFelix) hasProblem(setting, source, kind string) bool {
	_, body := get(f.metrics + "/metrics")
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "tabby_felix_config_problems{") && strings.Contains(l, `setting="`+setting+`"`) &&
			strings.Contains(l, `source="`+source+`"`) && strings.Contains(l, `kind="`+kind+`"`) && strings.HasSuffix(l, " 1") {
			return true
		}
	}
	return false
}
