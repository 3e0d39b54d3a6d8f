package birdctl

import (
	"net/netip"
	"regexp"
	"strings"
)

// Peer is one BGP session of `show protocols`, named as confd names them
// (Mesh_<ip>, Node_<ip>, Global_<ip>, optionally _port_<n>).
type Peer struct {
	Name   string
	PeerIP netip.Addr
	// Type is Calico's: "node-to-node mesh", "global" or "node specific".
	Type string
	// State is BIRD's protocol state (up, start, down...), Since when it
	// entered it, BGPState the session's (Established, Active, Connect...).
	State, Since, BGPState string
	// Info is the rest of the line (e.g. "Socket: Connection refused").
	Info string
}

// Established says the session is up.
func (p Peer) Established() bool { return p.BGPState == "Established" }

var peerName = regexp.MustCompile(`^(Global|Node|Mesh)_(.+?)(_port_\d+)?$`)

var peerTypes = map[string]string{"Global": "global", "Mesh": "node-to-node mesh", "Node": "node specific"}

// Peers picks the BGP sessions out of a `show protocols` reply. Lines of
// other protocols, and BGP protocols not named as confd names peers, are
// skipped.
func Peers(lines []Line) []Peer {
	var out []Peer
	for _, l := range lines {
		if l.Code != 1002 && l.Code != 0 {
			continue
		}
		f := strings.Fields(l.Text)
		if len(f) < 5 || f[1] != "BGP" {
			continue
		}
		m := peerName.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		ip, ok := symbolIP(m[2])
		if !ok {
			continue
		}
		p := Peer{Name: f[0], PeerIP: ip, Type: peerTypes[m[1]], State: f[3], Since: f[4]}
		rest := f[5:]
		// timeformat "iso long" gives "YYYY-MM-DD hh:mm:ss": two fields.
		if len(rest) > 0 && strings.Count(f[4], "-") == 2 && strings.Count(rest[0], ":") == 2 {
			p.Since += " " + rest[0]
			rest = rest[1:]
		}
		if len(rest) > 0 {
			p.BGPState = rest[0]
			p.Info = strings.Join(rest[1:], " ")
		}
		out = append(out, p)
	}
	return out
}

// symbolIP reverses confd's symbol encoding (dots or colons as
// underscores).
func symbolIP(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(strings.ReplaceAll(s, "_", ".")); err == nil && a.Is4() {
		return a, true
	}
	if a, err := netip.ParseAddr(strings.ReplaceAll(s, "_", ":")); err == nil && a.Is6() {
		return a, true
	}
	return netip.Addr{}, false
}

// Status is the daemon's state from `show status`.
type Status struct {
	Version, RouterID, LastBoot, LastReconfiguration string
	// Up is "Daemon is up and running"; GracefulRestart says graceful
	// restart recovery is in progress (code 0024).
	Up, GracefulRestart bool
}

// ParseStatus reads a `show status` reply.
func ParseStatus(lines []Line) Status {
	var s Status
	for _, l := range lines {
		t := strings.TrimSpace(l.Text)
		switch {
		case l.Code == 1000:
			s.Version = strings.TrimSpace(strings.TrimPrefix(t, "BIRD"))
		case strings.HasPrefix(t, "Router ID is "):
			s.RouterID = strings.TrimPrefix(t, "Router ID is ")
		case strings.HasPrefix(t, "Last reboot on "):
			s.LastBoot = strings.TrimPrefix(t, "Last reboot on ")
		case strings.HasPrefix(t, "Last reconfiguration on "):
			s.LastReconfiguration = strings.TrimPrefix(t, "Last reconfiguration on ")
		case l.Code == 13:
			s.Up = true
		case l.Code == 24:
			s.GracefulRestart = true
		}
	}
	return s
}

// Route is one route of `show route`, as Calico's node status reports
// it.
type Route struct {
	// Destination is the prefix.
	Destination string
	// Gateway is the next hop ("N/A" when the route has none), Interface
	// its device.
	Gateway, Interface string
	// Protocol is the BIRD protocol that gave the route (a peer's name,
	// a static or kernel protocol).
	Protocol string
	// Primary says the route is the best one for its destination (the
	// one in the FIB).
	Primary bool
	// Type is BIRD's route type (unicast, blackhole, unreachable...).
	Type string
}

// ParseRoutes reads a `show route` reply: a route line, then its next
// hops ("via <gw> on <if>" or "dev <if>"); a second route for the same
// prefix starts with spaces instead of the prefix.
func ParseRoutes(lines []Line) []Route {
	var (
		out  []Route
		last string
	)
	for _, l := range lines {
		if l.Code != 1007 && l.Code != 0 && l.Code != 1008 {
			continue
		}
		t := l.Text
		if strings.HasPrefix(t, "Table ") {
			continue
		}
		if strings.HasPrefix(t, "\t") {
			if len(out) == 0 {
				continue
			}
			r := &out[len(out)-1]
			f := strings.Fields(t)
			switch {
			case len(f) >= 4 && f[0] == "via" && f[2] == "on":
				if r.Gateway == "N/A" || r.Gateway == "" {
					r.Gateway, r.Interface = f[1], f[3]
				}
			case len(f) >= 2 && f[0] == "dev":
				if r.Interface == "" {
					r.Interface = f[1]
				}
			}
			continue
		}
		f := strings.Fields(t)
		if len(f) < 3 {
			continue
		}
		var dst string
		if strings.HasPrefix(t, " ") || strings.HasPrefix(f[1], "[") {
			dst = last // another route for the previous prefix
		} else {
			dst, f = f[0], f[1:]
		}
		if dst == "" || len(f) < 2 || !strings.HasPrefix(f[1], "[") {
			continue
		}
		last = dst
		out = append(out, Route{Destination: dst, Type: f[0], Protocol: strings.TrimPrefix(f[1], "["),
			Gateway: "N/A", Primary: strings.Contains(t, "] * ")})
	}
	return out
}

// PeerIPOfProtocol is the peer address a protocol name encodes (false
// for protocols that are not confd's BGP peers).
func PeerIPOfProtocol(name string) (netip.Addr, bool) {
	m := peerName.FindStringSubmatch(name)
	if m == nil {
		return netip.Addr{}, false
	}
	return symbolIP(m[2])
}

// ProtocolTypes maps each protocol of a `show protocols` reply to its
// type (BGP, Static, Kernel, Direct, Device...).
func ProtocolTypes(lines []Line) map[string]string {
	out := map[string]string{}
	for _, l := range lines {
		if l.Code != 1002 && l.Code != 0 {
			continue
		}
		if f := strings.Fields(l.Text); len(f) >= 2 {
			out[f[0]] = f[1]
		}
	}
	return out
}
