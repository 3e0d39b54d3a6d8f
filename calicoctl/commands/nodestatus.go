package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/confd/bird"
)

// defaultBirdSockets are where BIRD's control socket is looked for when
// --bird-socket is not given: Calico's path first, then BIRD's own default.
var defaultBirdSockets = []string{"/var/run/calico/bird.ctl", "/var/run/bird/bird.ctl"}

// birdCommand runs one birdc command against a control socket; tests may
// replace app.birdc.
type birdCommand func(ctx context.Context, socket string, args ...string) ([]byte, error)

func realBirdc(ctx context.Context, socket string, args ...string) ([]byte, error) {
	return bird.Exec{Socket: socket}.Command(ctx, args...)
}

// bgpPeer is one row of node status.
type bgpPeer struct {
	addr, peerType, state, since, info string
	ip                                 netip.Addr
	port                               int
	v6                                 bool
}

// peerNameRE is the protocol naming confd's renderer uses: Mesh_ for the
// node-to-node mesh, Global_ for global BGPPeers, Node_ for node-specific
// ones; the address with dots/colons as underscores, and _port_N when the
// peer listens on a non-default port.
var peerNameRE = regexp.MustCompile(`^(Mesh|Global|Node)_(.+?)(?:_port_(\d+))?$`)

var peerTypes = map[string]string{"Mesh": "node-to-node mesh", "Global": "global", "Node": "node specific"}

// bgpPeers picks Calico's BGP sessions out of `birdc show protocols`,
// sorted by address.
func bgpPeers(ps map[string]bird.Protocol) []bgpPeer {
	var out []bgpPeer
	for name, p := range ps {
		if !strings.EqualFold(p.Proto, "BGP") {
			continue
		}
		m := peerNameRE.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		addr, ok := peerAddr(m[2])
		if !ok {
			continue
		}
		shown, portN := addr.String(), 0
		if m[3] != "" {
			port, err := strconv.ParseUint(m[3], 10, 16)
			if err != nil {
				continue
			}
			shown, portN = netip.AddrPortFrom(addr, uint16(port)).String(), int(port)
		}
		out = append(out, bgpPeer{addr: shown, peerType: peerTypes[m[1]], state: p.State, since: p.Since, info: p.Info, ip: addr, port: portN, v6: addr.Is6()})
	}
	slices.SortFunc(out, func(a, b bgpPeer) int {
		if c := a.ip.Compare(b.ip); c != 0 {
			return c
		}
		return a.port - b.port
	})
	return out
}

// peerAddr turns the symbol part back into an address: IPv4 when it reads
// as one with dots, else IPv6 with colons.
func peerAddr(sym string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.ReplaceAll(sym, "_", ".")); err == nil && a.Is4() {
		return a, true
	}
	if a, err := netip.ParseAddr(strings.ReplaceAll(sym, "_", ":")); err == nil && a.Is6() {
		return a, true
	}
	return netip.Addr{}, false
}

// printNodeStatus writes Calico's node status layout.
func printNodeStatus(w io.Writer, peers []bgpPeer) {
	for _, fam := range []struct {
		name string
		v6   bool
	}{{"IPv4", false}, {"IPv6", true}} {
		fmt.Fprintf(w, "\n%s BGP status\n", fam.name)
		var rows [][]string
		for _, p := range peers {
			if p.v6 == fam.v6 {
				rows = append(rows, []string{p.addr, p.peerType, p.state, p.since, p.info})
			}
		}
		if len(rows) == 0 {
			fmt.Fprintf(w, "No %s peers found.\n", fam.name)
			continue
		}
		boxTable(w, []string{"PEER ADDRESS", "PEER TYPE", "STATE", "SINCE", "INFO"}, rows)
	}
	fmt.Fprintln(w)
}

func (a *app) nodeStatus(ctx context.Context, socket string) error {
	list := a.procs
	if list == nil {
		list = runningProcesses
	}
	procs := list()
	if !agentRunning(procs) {
		return errors.New("Calico process is not running.") //nolint:staticcheck // Calico's message
	}
	fmt.Fprintln(a.stdout, "Calico process is running.")
	if !birdRunning(procs) {
		fmt.Fprint(a.stdout, "\nThe BGP backend process (BIRD) is not running.\n\n")
		return nil
	}
	if socket == "" {
		for _, s := range defaultBirdSockets {
			if _, err := os.Stat(s); err == nil {
				socket = s
				break
			}
		}
		if socket == "" {
			return fmt.Errorf("no BIRD control socket at %s: is the node agent running here? Give the socket with --bird-socket=PATH", strings.Join(defaultBirdSockets, " or "))
		}
	}
	run := a.birdc
	if run == nil {
		run = realBirdc
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := run(ctx, socket, "show", "protocols")
	if err != nil || !strings.Contains(string(out), "Name") {
		msg := strings.TrimSpace(string(out))
		if err == nil {
			err = errors.New("unexpected answer")
		}
		return fmt.Errorf("asking BIRD at %s for its protocols: %w: %s (is BIRD running, and is --bird-socket right?)", socket, err, msg)
	}
	printNodeStatus(a.stdout, bgpPeers(bird.ParseProtocols(string(out))))
	return nil
}

// newNodeStatusCmd is node status.
func newNodeStatusCmd(a *app) *cobra.Command {
	var socket string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show this node's BGP sessions, read from BIRD's control socket",
		Example: `  calicoctl node status
  calicoctl node status --bird-socket=/var/run/bird/bird.ctl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.nodeStatus(cmdContext(cmd), socket)
		},
	}
	status.Flags().StringVar(&socket, "bird-socket", "", "BIRD's control socket [default /var/run/calico/bird.ctl, else /var/run/bird/bird.ctl]")
	return status
}
