//go:build privileged && integration

package crossnode

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/confd/bird/birdtest"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/internal/multinode"
)

// startConfd runs BIRD and confd on every node of the lab (the BGP
// full mesh, Calico's default), until the test ends.
func startConfd(t testing.TB, l *lab) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var rs []v3.Resource
	for _, k := range confd.Kinds {
		list, err := l.Client.List(ctx, k, datastore.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, list.Items...)
	}
	logs := t.TempDir()
	for _, n := range l.Nodes {
		in, err := render.FromResources(n.Name, rs)
		if err != nil {
			t.Fatal(err)
		}
		in.LogFile = filepath.Join(logs, n.Name+".log")
		conf, err := render.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		b := birdtest.StartBIRD(t, n.NetNS, conf)
		drv, err := bird.NewDriver(b.ConfigPath, b.Ctl)
		if err != nil {
			t.Fatal(err)
		}
		d := confd.NewDaemon(confd.Config{NodeName: n.Name, LogFile: in.LogFile,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, drv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.RunWithSyncer(ctx, l.Client)
		}()
	}
}

// TestPrivilegedCrossNodeBGP: a pool with no encapsulation (BGP's job):
// confd + BIRD on every node mesh and program `proto bird` routes to the
// other nodes' blocks; felix's route manager programs none and removes
// none of BIRD's; pods talk across nodes unencapsulated.
func TestPrivilegedCrossNodeBGP(t *testing.T) {
	l := newLab(t, nil, multinode.PoolOptions{VXLAN: v3.VXLANModeNever, IPIP: v3.IPIPModeNever})
	startConfd(t, l)
	l.allPodToPod(t)
	for i, n := range l.Nodes {
		r, err := n.IP("-4", "route", "show", "proto", "bird")
		if err != nil {
			t.Fatal(err)
		}
		for j, p := range l.pods {
			if j != i && !strings.Contains(r, blockOf(p.IP)+" via "+l.Nodes[j].Addr.Addr().String()) {
				t.Errorf("%s has no BIRD route to %s via %s:\n%s", n.Name, blockOf(p.IP), l.Nodes[j].Name, r)
			}
		}
		if _, err := n.NL.LinkByName(routes.VXLANDevice); err == nil {
			t.Errorf("%s has vxlan.calico with no VXLAN pool", n.Name)
		}
		felixRoutes, _ := n.IP("-4", "route", "show", "proto", "boot")
		for _, line := range strings.Split(felixRoutes, "\n") {
			if strings.Contains(line, " via ") && !strings.HasPrefix(line, "default") { // the lab's own default route
				t.Errorf("%s: felix programmed a route with BGP in charge: %s", n.Name, line)
			}
		}
	}
}
