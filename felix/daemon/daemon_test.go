package daemon_test

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

func newDaemon(k *fake.Kernel) *daemon.Daemon {
	log := slog.New(slog.DiscardHandler)
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4, Logger: log})
	return daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp,
		Debounce: time.Millisecond, Logger: log})
}

func updates(objs ...any) []datastore.Update {
	var ups []datastore.Update
	for _, o := range objs {
		r := o.(v3.Resource)
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r})
	}
	return ups
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProgramsOnlyAfterSnapshotAndFollowsUpdates(t *testing.T) {
	k := fake.NewKernel()
	d := newDaemon(k)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	d.OnStatusUpdated(datastore.StatusWaitForDatastore)
	d.OnUpdates(updates(ct.Scenario()...))
	time.Sleep(50 * time.Millisecond)
	if got := k.Count("iptables-restore"); got != 0 {
		t.Fatalf("programmed %d times before the snapshot was complete", got)
	}
	d.OnStatusUpdated(datastore.StatusInSync)
	waitFor(t, "endpoint chains", func() bool { return len(k.Rules(4, "cali-tw-cali1111")) > 0 })

	// Deleting the web endpoint removes its chains.
	w := ct.Scenario()[4].(*v3.WorkloadEndpoint)
	d.OnUpdates([]datastore.Update{{Type: datastore.EventDeleted, Key: datastore.KeyOf(w), Object: w}})
	waitFor(t, "web's chains to go", func() bool { return !slices.Contains(k.Chains(4), "cali-tw-cali1111") })
}

// TestFelixConfigurationChangesRendering: a FelixConfiguration (global,
// then this node's) changes the failsafe ports without a restart.
func TestFelixConfigurationChangesRendering(t *testing.T) {
	k := fake.NewKernel()
	log := slog.New(slog.DiscardHandler)
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4, Logger: log})
	d := daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp,
		Debounce: time.Millisecond, Logger: log,
		RulesConfig: func(global, node *v3.FelixConfigurationSpec) rules.Config {
			rc := rules.DefaultConfig()
			for _, s := range []*v3.FelixConfigurationSpec{global, node} {
				if s != nil && s.FailsafeInboundHostPorts != nil {
					rc.FailsafeInbound = nil
					for _, p := range *s.FailsafeInboundHostPorts {
						rc.FailsafeInbound = append(rc.FailsafeInbound, rules.ProtoPort{Protocol: p.Protocol, Port: p.Port})
					}
				}
			}
			return rc
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()

	fc := func(name string, port uint16) *v3.FelixConfiguration {
		ports := []v3.ProtoPort{{Protocol: "tcp", Port: port}}
		return &v3.FelixConfiguration{
			TypeMeta:   metav1.TypeMeta{Kind: v3.KindFelixConfiguration, APIVersion: "projectcalico.org/v3"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v3.FelixConfigurationSpec{FailsafeInboundHostPorts: &ports},
		}
	}
	failsafe := func() string { return strings.Join(k.Rules(4, "cali-failsafe-in"), "\n") }
	d.OnUpdates(updates(ct.Scenario()...))
	d.OnStatusUpdated(datastore.StatusInSync)
	waitFor(t, "default failsafe ports", func() bool { return strings.Contains(failsafe(), "--dports 22 ") })
	d.OnUpdates(updates(fc("default", 2222)))
	waitFor(t, "global FelixConfiguration", func() bool {
		f := failsafe()
		return strings.Contains(f, "--dports 2222 ") && !strings.Contains(f, "--dports 22 ")
	})
	d.OnUpdates(updates(fc("node."+ct.Node, 3333), fc("node.other", 4444)))
	waitFor(t, "this node's FelixConfiguration", func() bool {
		f := failsafe()
		return strings.Contains(f, "--dports 3333 ") && !strings.Contains(f, "4444")
	})
}

// TestHostEndpointByExpectedIPs: a host endpoint without an interface
// name is rendered on the interface holding its expected IP (the
// addresses come from the watcher, through OnHostInterfaces), and follows
// the address when it moves to another interface.
func TestHostEndpointByExpectedIPs(t *testing.T) {
	k := fake.NewKernel()
	log := slog.New(slog.DiscardHandler)
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4, Logger: log})
	d := daemon.New(daemon.Config{NodeName: ct.Node, Rules: rules.DefaultConfig(), Dataplane: dp,
		Debounce: time.Millisecond, Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, nil) }()
	defer func() { cancel(); <-done }()

	addrs := func(m map[string]string) map[string][]netip.Addr {
		out := map[string][]netip.Addr{}
		for iface, a := range m {
			out[iface] = []netip.Addr{netip.MustParseAddr(a)}
		}
		return out
	}
	d.OnHostInterfaces(addrs(map[string]string{"lo": "127.0.0.1", "eth1": "192.168.51.1", "eth2": "192.168.52.1"}))
	d.OnUpdates(updates(ct.HEP("node1-ip", ct.Node, "", map[string]string{"role": "node"}, "192.168.51.1")))
	d.OnStatusUpdated(datastore.StatusInSync)
	waitFor(t, "the host endpoint on eth1", func() bool { return slices.Contains(k.Chains(4), "cali-fh-eth1") })
	if slices.Contains(k.Chains(4), "cali-fh-eth2") {
		t.Fatal("eth2 does not hold the expected IP but got host endpoint chains")
	}
	d.OnHostInterfaces(addrs(map[string]string{"eth1": "192.168.51.9", "eth2": "192.168.51.1"}))
	waitFor(t, "the host endpoint to follow its IP to eth2", func() bool {
		c := k.Chains(4)
		return slices.Contains(c, "cali-fh-eth2") && !slices.Contains(c, "cali-fh-eth1")
	})
}
