//go:build privileged && integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestPrivilegedFelixRestartsInProcess: a FelixConfiguration change to a
// setting felix applies only at start (routeRefreshInterval) restarts
// felix inside calico-node, as Calico's runit restarts felix alone in the
// calico-node container: the calico-node process keeps running, BIRD keeps
// its PID, a TCP stream between pods on the two nodes keeps flowing, felix
// is ready again, its metrics port serves felix's and calico-node's
// metrics (each run registers felix's metrics anew), /readiness shows the
// same parts, and a second restart leaves no more goroutines than the
// first (nothing of the stopped run left behind). Built with -race, the
// agents run in this test binary (see agent.inProcess) so that the race
// detector watches the restarts.
func TestPrivilegedFelixRestartsInProcess(t *testing.T) {
	l := newBGPLabWith(t, raceEnabled)
	a0 := l.agents[0]
	s := startStream(t, l.pods[1].NetNS, l.pods[0].NetNS, net.JoinHostPort(l.pods[1].IP.String(), "9090"))
	s.flows(t, 20, "stream started")
	bird, pid := a0.birdPid(), a0.cmd.Process.Pid
	if bird == 0 {
		t.Fatal("no BIRD on node0")
	}
	_, readiness := a0.http("/readiness")
	parts := componentNames(readiness)

	var goroutines []int
	for i, interval := range []int{61, 62} {
		starts := strings.Count(a0.log.String(), "felix starting")
		restarts := strings.Count(a0.log.String(), "restarting it in calico-node's process")
		setRouteRefresh(t, l, interval)
		eventually(t, 30*time.Second, "felix restarted in-process", func() (bool, string) {
			log := a0.log.String()
			return strings.Count(log, "restarting it in calico-node's process") > restarts && strings.Count(log, "felix starting") > starts,
				"no restart logged yet"
		})
		if !a0.running() || a0.cmd.Process.Pid != pid {
			t.Fatalf("calico-node exited on a start-time setting change: %v", a0.cmd.ProcessState)
		}
		a0.waitReady(60 * time.Second)
		if got := a0.birdPid(); got != bird {
			t.Errorf("restart %d: BIRD's PID %d, was %d: BIRD restarted with felix", i+1, got, bird)
		}
		s.flows(t, 20, fmt.Sprintf("stream after felix's restart %d", i+1))
		m := a0.metrics()
		for _, want := range []string{"tabby_confd_syncs_total", "tabby_bird_up 1", "felix_int_dataplane_apply_time_seconds"} {
			if !strings.Contains(m, want) {
				t.Errorf("restart %d: the metrics port lacks %s", i+1, want)
			}
		}
		_, readiness := a0.http("/readiness")
		if got := componentNames(readiness); got != parts {
			t.Errorf("restart %d: /readiness shows\n%s\nwas\n%s", i+1, got, parts)
		}
		goroutines = append(goroutines, settledGoroutines(t, a0))
	}
	t.Logf("goroutines after the first restart %d, after the second %d", goroutines[0], goroutines[1])
	if goroutines[1] > goroutines[0]+3 {
		t.Errorf("goroutines grew from %d to %d over one felix restart: the stopped run left some behind", goroutines[0], goroutines[1])
	}
	if strings.Contains(a0.log.String(), "calico-node stopped") {
		t.Error("calico-node logged its own stop")
	}
	if strings.Contains(a0.log.String(), "DATA RACE") {
		t.Errorf("the race detector reported a data race:\n%s", a0.log.String())
	}
}

// setRouteRefresh sets routeRefreshInterval (applied at felix's start)
// in the default FelixConfiguration.
func setRouteRefresh(t *testing.T, l *bgpLab, seconds int) {
	t.Helper()
	ctx := context.Background()
	r, err := l.c.Client.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	fc := r.(*v3.FelixConfiguration)
	fc.Spec.RouteRefreshInterval = &metav1.Duration{Duration: time.Duration(seconds) * time.Second}
	if _, err := l.c.Client.Update(ctx, fc); err != nil {
		t.Fatal(err)
	}
}

// componentNames are the component names of a /readiness body.
func componentNames(body string) string {
	var names []string
	for _, l := range strings.Split(body, "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok {
			names = append(names, name)
		}
	}
	return strings.Join(names, "\n")
}

var goroutinesMetric = regexp.MustCompile(`(?m)^go_goroutines (\d+)`)

// settledGoroutines is the least go_goroutines of a few scrapes a second
// apart (transient goroutines, such as the scrape's own, come and go).
func settledGoroutines(t *testing.T, a *agent) int {
	t.Helper()
	least := -1
	for i := 0; i < 5; i++ {
		time.Sleep(time.Second)
		m := goroutinesMetric.FindStringSubmatch(a.metrics())
		if m == nil {
			t.Fatal("no go_goroutines on the metrics port")
		}
		n, _ := strconv.Atoi(m[1])
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}
