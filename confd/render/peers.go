package render

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tabbynet/tabby/api/numorstring"
	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// peer is one BGP session of this node.
type peer struct {
	name         string // BIRD protocol name
	origin       string // comment: where the session comes from
	ip           netip.Addr
	port         uint16 // 0: BIRD's default (179)
	asn          numorstring.ASNumber
	localAS      numorstring.ASNumber
	source       netip.Addr // invalid: none
	passive      bool
	password     string
	hasPassword  bool
	restartTime  int // seconds, 0: template default
	keepalive    int // seconds, 0: BIRD default
	ttlSecurity  uint8
	rrClient     bool
	nextHop      string // "", "self" or "keep"
	allowLocalAS int32
	filters      []*bgpFilter
}

func (p *peer) internal() bool { return p.asn == p.localAS }

// target is a remote end before the BGPPeer's options are applied.
type target struct {
	ip         netip.Addr
	port       uint16
	asn        numorstring.ASNumber
	rrID       string
	calicoNode bool
	reverse    bool // implied by a BGPPeer whose remote end is this node
}

// peerSet collects peers; the first peering for a key wins, as in Calico
// (explicit global, then node-specific, then implicit reverse peerings).
type peerSet struct {
	m    *model
	me   *nodeInfo
	seen map[string]bool
	sels map[string]*selector.Selector // parsed once per render
}

func (s *peerSet) parseSel(expr string) (*selector.Selector, error) {
	if sel, ok := s.sels[expr]; ok {
		return sel, nil
	}
	sel, err := selector.Parse(expr)
	if err != nil {
		return nil, err
	}
	s.sels[expr] = sel
	return sel, nil
}

func (s *peerSet) add(p *peer) {
	key := p.ip.String() + "|" + strconv.Itoa(int(p.port))
	if s.seen[key] {
		return
	}
	s.seen[key] = true
	f := s.m.fam[famIndex(p.ip)]
	f.peers = append(f.peers, p)
}

func addPeers(m *model, in Input, me *nodeInfo, nodes []*nodeInfo, mesh bool, spec v3.BGPConfigurationSpec, filters []*bgpFilter) error {
	s := &peerSet{m: m, me: me, seen: map[string]bool{}, sels: map[string]*selector.Selector{}}

	// Node-to-node mesh: route reflectors are left out on both ends.
	if mesh && me.rrID == "" {
		pw, hasPW, err := password(in.Secrets, spec.NodeMeshPassword, "BGPConfiguration default nodeMeshPassword")
		if err != nil {
			return err
		}
		restart := seconds(spec.NodeMeshMaxRestartTime)
		for _, n := range nodes {
			if n.rrID != "" || n.name == me.name {
				continue
			}
			for fi, f := range m.fam {
				if f == nil || !n.ip[fi].IsValid() || n.ip[fi] == f.nodeIP {
					continue
				}
				ip := n.ip[fi]
				s.add(&peer{
					name: "Mesh_" + symIP(ip), origin: "mesh with node " + n.name,
					ip: ip, port: portOrDefault(n.port), asn: n.asn, localAS: me.asn,
					source: f.nodeIP, password: pw, hasPassword: hasPW, restartTime: restart,
					// Of each pair only the lower address connects (string order,
					// as Calico, so mixed clusters agree).
					passive: ip.String() > f.nodeIP.String(),
				})
			}
		}
	}

	bgpPeers := slices.Clone(in.Peers)
	slices.SortFunc(bgpPeers, func(a, b v3.BGPPeer) int { return strings.Compare(a.Name, b.Name) })
	for i := range bgpPeers {
		if err := checkPeer(&bgpPeers[i]); err != nil {
			return err
		}
	}
	filterByName := map[string]*bgpFilter{}
	for _, f := range filters {
		filterByName[f.name] = f
	}

	// Explicit peerings: global ones first so they win over node-specific ones.
	for _, global := range []bool{true, false} {
		for i := range bgpPeers {
			bp := &bgpPeers[i]
			isGlobal := bp.Spec.Node == "" && bp.Spec.NodeSelector == ""
			if isGlobal != global {
				continue
			}
			if !global {
				ok, err := s.nodeSelected(bp, me)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
			}
			targets, err := s.explicitTargets(bp, nodes, me)
			if err != nil {
				return err
			}
			prefix := "Node"
			if global {
				prefix = "Global"
			}
			for _, t := range targets {
				if err := s.addFromResource(in, bp, t, prefix, filterByName); err != nil {
					return err
				}
			}
		}
	}

	// Reverse peerings: when this node is the remote end of a BGPPeer between
	// Calico nodes, peer back with the nodes on its local end.
	for i := range bgpPeers {
		bp := &bgpPeers[i]
		if r := bp.Spec.ReversePeering; r != nil && *r == v3.ReversePeeringManual {
			continue
		}
		fams, err := s.reverseFamilies(bp, me)
		if err != nil {
			return err
		}
		if fams == [2]bool{} {
			continue
		}
		for _, n := range nodes {
			if n.name == me.name {
				continue
			}
			ok, err := s.nodeSelected(bp, n)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			for fi := range 2 {
				if !fams[fi] || !n.ip[fi].IsValid() {
					continue
				}
				t := target{ip: n.ip[fi], port: portOrDefault(n.port), asn: n.asn, rrID: n.rrID, reverse: true}
				if err := s.addFromResource(in, bp, t, "Node", filterByName); err != nil {
					return err
				}
			}
		}
	}

	for _, f := range m.fam {
		if f != nil {
			slices.SortFunc(f.peers, func(a, b *peer) int { return strings.Compare(a.name, b.name) })
		}
	}
	return nil
}

// checkPeer rejects a BGPPeer the renderer cannot express, with the reason.
func checkPeer(bp *v3.BGPPeer) error {
	if errs := bp.Validate(); len(errs) > 0 {
		return fmt.Errorf("BGPPeer %q is invalid: %w", bp.Name, errs)
	}
	if bp.Spec.PeerIP != "" && bp.Spec.ASNumber == 0 {
		return fmt.Errorf("BGPPeer %q is invalid: spec.asNumber is required with spec.peerIP", bp.Name)
	}
	if bp.Spec.PeerIP == "" && bp.Spec.PeerSelector == "" && bp.Spec.LocalWorkloadSelector == "" {
		return fmt.Errorf("BGPPeer %q is invalid: set spec.peerIP or spec.peerSelector", bp.Name)
	}
	return nil
}

// nodeSelected says whether node n is on the local end of bp.
func (s *peerSet) nodeSelected(bp *v3.BGPPeer, n *nodeInfo) (bool, error) {
	switch {
	case bp.Spec.Node != "":
		return bp.Spec.Node == n.name, nil
	case bp.Spec.NodeSelector != "":
		sel, err := s.parseSel(bp.Spec.NodeSelector)
		if err != nil {
			return false, fmt.Errorf("BGPPeer %q: nodeSelector: %w", bp.Name, err)
		}
		return sel.Evaluate(n.labels), nil
	}
	return true, nil
}

// explicitTargets expands bp's remote end (peerIP or peerSelector).
func (s *peerSet) explicitTargets(bp *v3.BGPPeer, nodes []*nodeInfo, me *nodeInfo) ([]target, error) {
	if bp.Spec.PeerSelector != "" {
		sel, err := s.parseSel(bp.Spec.PeerSelector)
		if err != nil {
			return nil, fmt.Errorf("BGPPeer %q: peerSelector: %w", bp.Name, err)
		}
		var out []target
		for _, n := range nodes {
			if n.name == me.name || !sel.Evaluate(n.labels) {
				continue
			}
			for fi := range 2 {
				if n.ip[fi].IsValid() {
					out = append(out, target{ip: n.ip[fi], port: portOrDefault(n.port), asn: n.asn, rrID: n.rrID})
				}
			}
		}
		return out, nil
	}
	if bp.Spec.PeerIP == "" {
		return nil, nil // localWorkloadSelector peers are not rendered yet
	}
	ip, port, err := splitPeerIP(bp.Spec.PeerIP)
	if err != nil {
		return nil, fmt.Errorf("BGPPeer %q is invalid: spec.peerIP: %w", bp.Name, err)
	}
	t := target{ip: ip, port: port, asn: bp.Spec.ASNumber}
	for _, n := range nodes {
		if n.ip[famIndex(ip)] == ip {
			t.calicoNode = true
			if port == 0 && n.asn == bp.Spec.ASNumber {
				t.port = portOrDefault(n.port)
			}
		}
	}
	return []target{t}, nil
}

// reverseFamilies says for which IP versions this node is bp's remote end.
func (s *peerSet) reverseFamilies(bp *v3.BGPPeer, me *nodeInfo) ([2]bool, error) {
	if bp.Spec.PeerSelector != "" {
		sel, err := s.parseSel(bp.Spec.PeerSelector)
		if err != nil {
			return [2]bool{}, fmt.Errorf("BGPPeer %q: peerSelector: %w", bp.Name, err)
		}
		if sel.Evaluate(me.labels) {
			return [2]bool{true, true}, nil
		}
		return [2]bool{}, nil
	}
	if bp.Spec.PeerIP == "" {
		return [2]bool{}, nil
	}
	ip, port, err := splitPeerIP(bp.Spec.PeerIP)
	if err != nil {
		return [2]bool{}, fmt.Errorf("BGPPeer %q is invalid: spec.peerIP: %w", bp.Name, err)
	}
	fi := famIndex(ip)
	if me.ip[fi] != ip || bp.Spec.ASNumber != me.asn || (port != 0 && port != me.port) {
		return [2]bool{}, nil
	}
	var out [2]bool
	out[fi] = true
	return out, nil
}

// addFromResource applies bp's options to one target and adds the peer.
func (s *peerSet) addFromResource(in Input, bp *v3.BGPPeer, t target, prefix string, filterByName map[string]*bgpFilter) error {
	f := s.m.fam[famIndex(t.ip)]
	if f == nil || t.ip == f.nodeIP {
		return nil // no session of that IP version here, or ourselves
	}
	p := &peer{
		name:   prefix + "_" + symIP(t.ip),
		origin: fmt.Sprintf("BGPPeer %s", bp.Name),
		ip:     t.ip, port: t.port, asn: t.asn, localAS: s.me.asn,
	}
	if t.port != 0 {
		p.name += fmt.Sprintf("_port_%d", t.port)
	}
	if t.reverse {
		p.origin += " (reverse peering)"
	}
	sp := &bp.Spec
	if sp.LocalASNumber != nil {
		p.localAS = *sp.LocalASNumber
	}
	if sp.SourceAddress == "" || sp.SourceAddress == v3.SourceAddressUseNodeIP {
		p.source = f.nodeIP
	}
	pw, hasPW, err := password(in.Secrets, sp.Password, fmt.Sprintf("BGPPeer %q password", bp.Name))
	if err != nil {
		return err
	}
	p.password, p.hasPassword = pw, hasPW
	p.restartTime = seconds(sp.MaxRestartTime)
	p.keepalive = seconds(sp.KeepaliveTime)
	if sp.TTLSecurity != nil {
		p.ttlSecurity = *sp.TTLSecurity
	}
	if sp.NumAllowedLocalASNumbers != nil {
		p.allowLocalAS = *sp.NumAllowedLocalASNumbers
	}
	if m := sp.NextHopMode; m != nil {
		switch *m {
		case v3.NextHopModeSelf:
			p.nextHop = "self"
		case v3.NextHopModeKeep:
			p.nextHop = "keep"
		}
	}
	if sp.KeepOriginalNextHop && !p.internal() {
		p.nextHop = "keep"
	}
	// A route reflector treats iBGP peers outside its cluster as clients.
	if p.internal() && s.m.rrID != "" && t.rrID != s.m.rrID {
		p.rrClient = true
	}
	if prefix == "Global" && t.calicoNode && t.ip.String() > f.nodeIP.String() {
		p.passive = true
	}
	for _, name := range sp.Filters {
		if bf, ok := filterByName[name]; ok {
			p.filters = append(p.filters, bf)
		}
	}
	s.add(p)
	return nil
}

func password(secrets map[SecretRef]string, pw *v3.BGPPassword, what string) (string, bool, error) {
	if pw == nil || pw.SecretKeyRef == nil {
		return "", false, nil
	}
	ref := SecretRef{Name: pw.SecretKeyRef.Name, Key: pw.SecretKeyRef.Key}
	v, ok := secrets[ref]
	if !ok {
		return "", false, fmt.Errorf("%s: secret %s key %s is not available", what, ref.Name, ref.Key)
	}
	// The password is written verbatim between double quotes: a quote,
	// backslash or control character would end, corrupt or (as an escape)
	// silently change it.
	if v == "" || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 || r == 0x7f }) {
		return "", false, fmt.Errorf("%s: secret %s key %s is empty or holds a quote, backslash, newline or other control character, which BIRD cannot take", what, ref.Name, ref.Key)
	}
	return v, true, nil
}

func splitPeerIP(s string) (netip.Addr, uint16, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), 0, nil
	}
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q is not an IP or IP:port", s)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q is not an IP or IP:port", s)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 {
		return netip.Addr{}, 0, fmt.Errorf("%q has an invalid port", s)
	}
	return a.Unmap(), uint16(port), nil
}

// portOrDefault maps BGP's default port to 0 ("not written").
func portOrDefault(p uint16) uint16 {
	if p == v3.DefaultBGPListenPort {
		return 0
	}
	return p
}

func seconds(d *metav1.Duration) int {
	if d == nil {
		return 0
	}
	return int(math.Round(d.Seconds()))
}

// symIP turns an address into a BIRD symbol part: dots and colons become
// underscores (Mesh_10_0_0_2, Mesh_fd00__2).
func symIP(a netip.Addr) string {
	return strings.NewReplacer(".", "_", ":", "_").Replace(a.String())
}
