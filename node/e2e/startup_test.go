//go:build privileged && integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
)

// TestPrivilegedStartupInitialisesFreshDatastore: calico-node started on
// an empty etcd creates ClusterInformation (a 32-hex-digit GUID, its
// version, datastoreReady), the three tiers with Calico's orders, the
// default FelixConfiguration / node.<name> / BGPConfiguration /
// IPAMConfiguration, the default pool from CALICO_IPV4POOL_*, and the
// Node with its autodetected address; writes the nodename file; runs
// felix, confd and BIRD (no peers: ready); and its health endpoint and
// Calico's probe flags say ready. SIGTERM stops it cleanly.
func TestPrivilegedStartupInitialisesFreshDatastore(t *testing.T) {
	c := multinode.New(t, multinode.Options{Nodes: 1, Bare: true})
	n := c.Nodes[0]
	a := newAgent(t, c, n, "CALICO_IPV4POOL_CIDR=10.80.0.0/16", "CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=CrossSubnet",
		"CALICO_IPV4POOL_BLOCK_SIZE=28", "CALICO_IPV4POOL_NAT_OUTGOING=false", "CALICO_IPV4POOL_NODE_SELECTOR=all()",
		"CLUSTER_TYPE=k8s,bgp", "CALICO_NETWORKING_BACKEND=bird")
	a.start()
	a.waitReady(30 * time.Second)
	ctx := context.Background()
	get := func(kind, name string) v3.Resource {
		t.Helper()
		r, err := c.Client.Get(ctx, datastore.Key{Kind: kind, Name: name})
		if err != nil {
			t.Fatalf("%s %s: %v", kind, name, err)
		}
		return r
	}
	ci := get(v3.KindClusterInformation, "default").(*v3.ClusterInformation)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(ci.Spec.ClusterGUID) || ci.Spec.CalicoVersion == "" ||
		ci.Spec.DatastoreReady == nil || !*ci.Spec.DatastoreReady || ci.Spec.ClusterType != "k8s,bgp" {
		t.Errorf("ClusterInformation %+v", ci.Spec)
	}
	for name, order := range map[string]float64{"kube-admin": 1000, "default": 1e6, "kube-baseline": 1e7} {
		tier := get(v3.KindTier, name).(*v3.Tier)
		if tier.Spec.Order == nil || *tier.Spec.Order != order {
			t.Errorf("tier %s order %v, want %v", name, tier.Spec.Order, order)
		}
	}
	pool := get(v3.KindIPPool, "default-ipv4-ippool").(*v3.IPPool)
	if s := pool.Spec; s.CIDR != "10.80.0.0/16" || s.BlockSize != 28 || s.IPIPMode != v3.IPIPModeNever ||
		s.VXLANMode != v3.VXLANModeCrossSubnet || s.NATOutgoing || s.NodeSelector != "all()" {
		t.Errorf("default pool %+v", s)
	}
	fc := get(v3.KindFelixConfiguration, "default").(*v3.FelixConfiguration)
	if fc.Spec.LogSeverityScreen != "Info" || fc.Spec.ReportingInterval == nil || fc.Spec.ReportingInterval.Duration != 0 {
		t.Errorf("FelixConfiguration default %+v", fc.Spec)
	}
	if nfc := get(v3.KindFelixConfiguration, "node."+n.Name).(*v3.FelixConfiguration); nfc.Spec.DefaultEndpointToHostAction != "Return" {
		t.Errorf("FelixConfiguration node.%s: defaultEndpointToHostAction %q", n.Name, nfc.Spec.DefaultEndpointToHostAction)
	}
	get(v3.KindBGPConfiguration, "default")
	get(v3.KindIPAMConfiguration, "default")
	node := get(v3.KindNode, n.Name).(*v3.Node)
	if node.Spec.BGP == nil || node.Spec.BGP.IPv4Address != n.Addr.String() {
		t.Errorf("Node %s spec %+v, want bgp.ipv4Address %s", n.Name, node.Spec, n.Addr)
	}
	// The VXLAN CrossSubnet pool gives the node a VXLAN tunnel address.
	eventually(t, 10*time.Second, "VXLAN tunnel address on the Node", func() (bool, string) {
		node := get(v3.KindNode, n.Name).(*v3.Node)
		return node.Spec.IPv4VXLANTunnelAddr != "", node.Spec.IPv4VXLANTunnelAddr
	})
	if data, err := os.ReadFile(filepath.Join(a.dir, "nodename")); err != nil || string(data) != n.Name {
		t.Errorf("nodename file: %q, %v", data, err)
	}
	eventually(t, 10*time.Second, "/readiness 200 with felix, confd, BIRD and BGP ok", func() (bool, string) {
		code, body := a.http("/readiness")
		return code == 200 && strings.Contains(body, "bird: ok") && strings.Contains(body, "confd: ok") &&
			strings.Contains(body, "bgp: ok") && strings.Contains(body, "felix/dataplane: ok"), body
	})
	if code, body := a.http("/liveness"); code != 200 {
		t.Errorf("/liveness: %d %q", code, body)
	}
	if out, code := a.probe("-felix-live", "-bird-live"); code != 0 {
		t.Errorf("liveness probe: exit %d: %s", code, out)
	}
	if a.birdPid() == 0 {
		t.Error("no BIRD running under calico-node")
	}
	a.stop(syscall.SIGTERM)
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("calico-node exited %d after SIGTERM", code)
	}
	// A BIRD left running (as after a crash outside a container) is
	// replaced: calico-node kills it (its pid file) and runs its own.
	if out, code := a.inNode("bird", "-c", filepath.Join(a.dir, "bird.cfg"), "-s", filepath.Join(a.dir, "bird.ctl"), "-P", filepath.Join(a.dir, "bird.pid")); code != 0 {
		t.Fatalf("starting a stray BIRD: %s", out)
	}
	stale := 0
	eventually(t, 5*time.Second, "the stray BIRD's pid file", func() (bool, string) { stale = a.birdPid(); return stale != 0, "" })
	// A second start on the initialised datastore changes nothing.
	a.start()
	a.waitReady(30 * time.Second)
	if pid := a.birdPid(); pid == 0 || pid == stale {
		t.Errorf("BIRD pid %d after the restart, the stray one was %d", pid, stale)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", stale)); err == nil {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", stale)); strings.TrimSpace(string(comm)) == "bird" {
			t.Errorf("the stray BIRD %d still runs", stale)
		}
	}
	if !strings.Contains(a.log.String(), "killing the BIRD a previous calico-node left") {
		t.Error("calico-node did not say it killed the stray BIRD")
	}
	if again := get(v3.KindClusterInformation, "default").(*v3.ClusterInformation); again.Spec.ClusterGUID != ci.Spec.ClusterGUID {
		t.Errorf("restart changed the cluster GUID %s -> %s", ci.Spec.ClusterGUID, again.Spec.ClusterGUID)
	}
}
