package render

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Normal route priority (kernel metric) of locally originated routes; a
// lower metric is an elevated-priority route (Calico's convention).
const normalPriority = 1024

// ErrNoNode is returned when Input.NodeName has no Node resource.
var ErrNoNode = errors.New("local node not found")

// model is the computed, family-split view the writer prints.
type model struct {
	nodeName string
	routerID string
	logFile  string
	asn      numorstring.ASNumber
	rrID     string // this node's routeReflectorClusterID, "" if not an RR
	ignored  []string

	fam     [2]*family // index 0: IPv4, 1: IPv6; nil when the node has no address
	filters []*bgpFilter
}

// family is everything of one IP version.
type family struct {
	v          int // 4 or 6
	nodeIP     netip.Addr
	blocks     []netip.Prefix
	poolsOn    []netip.Prefix // BGP export enabled
	poolsOff   []netip.Prefix // disableBGPExport
	poolsEnc   []netip.Prefix // IPIP/VXLAN: BGP-learned routes not programmed by BIRD
	comms      []commRule
	peers      []*peer
	listenPort uint16
	bindNodeIP bool
}

type commRule struct {
	cidr  netip.Prefix
	std   [][2]uint32
	large [][3]uint32
}

// nodeInfo is a Node's BGP view.
type nodeInfo struct {
	name   string
	labels map[string]string
	ip     [2]netip.Addr // zero when absent
	asn    numorstring.ASNumber
	rrID   string
	port   uint16
}

func famIndex(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

// build computes the model from the input.
func build(in Input) (*model, error) {
	var def, local *v3.BGPConfiguration
	for i := range in.BGPConfigurations {
		c := &in.BGPConfigurations[i]
		switch c.Name {
		case "default":
			def = c
		case "node." + in.NodeName:
			local = c
		}
	}
	globalAS := v3.DefaultBGPASNumber
	mesh := true
	globalPort := v3.DefaultBGPListenPort
	var spec v3.BGPConfigurationSpec
	if def != nil {
		spec = def.Spec
		if spec.ASNumber != nil {
			globalAS = *spec.ASNumber
		}
		if spec.NodeToNodeMeshEnabled != nil {
			mesh = *spec.NodeToNodeMeshEnabled
		}
		if spec.ListenPort != 0 {
			globalPort = spec.ListenPort
		}
	}
	// A node-specific BGPConfiguration may set the listen port and prefix
	// advertisements of that node (as Calico's per-node keys do).
	nodePorts := map[string]uint16{}
	for i := range in.BGPConfigurations {
		c := &in.BGPConfigurations[i]
		if n, ok := strings.CutPrefix(c.Name, "node."); ok && c.Spec.ListenPort != 0 {
			nodePorts[n] = c.Spec.ListenPort
		}
	}
	prefixAdv := spec.PrefixAdvertisements
	if local != nil && len(local.Spec.PrefixAdvertisements) > 0 {
		prefixAdv = local.Spec.PrefixAdvertisements
	}

	nodes := make([]*nodeInfo, 0, len(in.Nodes))
	var me *nodeInfo
	for i := range in.Nodes {
		n, err := nodeInfoOf(&in.Nodes[i], globalAS, globalPort, nodePorts)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
		if n.name == in.NodeName {
			me = n
		}
	}
	if me == nil {
		return nil, fmt.Errorf("rendering BIRD config for node %q: %w", in.NodeName, ErrNoNode)
	}
	slices.SortFunc(nodes, func(a, b *nodeInfo) int { return strings.Compare(a.name, b.name) })

	m := &model{nodeName: in.NodeName, logFile: in.LogFile, asn: me.asn, rrID: me.rrID}
	m.ignored = slices.Clone(spec.IgnoredInterfaces)
	rid, err := routerID(in.RouterID, me)
	if err != nil {
		return nil, err
	}
	m.routerID = rid

	bindNodeIP := spec.BindMode != nil && *spec.BindMode == v3.BindModeNodeIP
	for fi := range 2 {
		if !me.ip[fi].IsValid() {
			continue
		}
		m.fam[fi] = &family{v: 4 + 2*fi, nodeIP: me.ip[fi], listenPort: me.port, bindNodeIP: bindNodeIP}
	}

	if err := addPools(m, in.Pools); err != nil {
		return nil, err
	}
	if err := addBlocks(m, in); err != nil {
		return nil, err
	}
	if err := addCommunities(m, spec.Communities, prefixAdv); err != nil {
		return nil, err
	}
	filters, err := buildFilters(in.Filters)
	if err != nil {
		return nil, err
	}
	m.filters = filters
	if err := addPeers(m, in, me, nodes, mesh, spec, filters); err != nil {
		return nil, err
	}
	return m, nil
}

func nodeInfoOf(n *v3.Node, globalAS numorstring.ASNumber, globalPort uint16, nodePorts map[string]uint16) (*nodeInfo, error) {
	ni := &nodeInfo{name: n.Name, labels: n.Labels, asn: globalAS, port: globalPort}
	if p, ok := nodePorts[n.Name]; ok {
		ni.port = p
	}
	b := n.Spec.BGP
	if b == nil {
		return ni, nil
	}
	if b.ASNumber != nil {
		ni.asn = *b.ASNumber
	}
	ni.rrID = b.RouteReflectorClusterID
	for fi, s := range []string{b.IPv4Address, b.IPv6Address} {
		if s == "" {
			continue
		}
		a, err := parseAddrOrCIDR(s)
		if err != nil || famIndex(a) != fi {
			return nil, fmt.Errorf("node %q: spec.bgp address %q is not an IPv%d address or CIDR", n.Name, s, 4+2*fi)
		}
		ni.ip[fi] = a
	}
	return ni, nil
}

func parseAddrOrCIDR(s string) (netip.Addr, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr(), nil
	}
	a, err := netip.ParseAddr(s)
	return a.Unmap(), err
}

// routerID chooses the BGP router ID as calico/node does.
func routerID(cfg string, me *nodeInfo) (string, error) {
	switch {
	case cfg == "hash" || (cfg == "" && !me.ip[0].IsValid()):
		return hashToIPv4(me.name), nil
	case cfg == "":
		return me.ip[0].String(), nil
	}
	a, err := netip.ParseAddr(cfg)
	if err != nil || !a.Is4() {
		return "", fmt.Errorf("router ID %q is not an IPv4 address or \"hash\"", cfg)
	}
	return a.String(), nil
}

// hashToIPv4 derives a router ID from the node name: the first four bytes of
// its SHA-256, the first octet moved out of the multicast/reserved range.
// Same function as calico/node, so a mixed cluster agrees on IDs.
func hashToIPv4(name string) string {
	h := sha256.Sum256([]byte(name))
	b0 := int(h[0])
	if b0 > 223 {
		b0 -= 32
	}
	return fmt.Sprintf("%d.%d.%d.%d", b0, h[1], h[2], h[3])
}

func addPools(m *model, pools []v3.IPPool) error {
	for i := range pools {
		p := &pools[i]
		pfx, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil {
			return fmt.Errorf("IPPool %q: cidr %q: %w", p.Name, p.Spec.CIDR, err)
		}
		pfx = pfx.Masked()
		f := m.fam[famIndex(pfx.Addr())]
		if f == nil {
			continue
		}
		if p.Spec.DisableBGPExport {
			f.poolsOff = append(f.poolsOff, pfx)
		} else {
			f.poolsOn = append(f.poolsOn, pfx)
		}
		enc := (p.Spec.IPIPMode != "" && p.Spec.IPIPMode != v3.IPIPModeNever) ||
			(p.Spec.VXLANMode != "" && p.Spec.VXLANMode != v3.VXLANModeNever)
		if enc {
			f.poolsEnc = append(f.poolsEnc, pfx)
		}
	}
	for _, f := range m.fam {
		if f != nil {
			f.poolsOn = sortPrefixes(f.poolsOn)
			f.poolsOff = sortPrefixes(f.poolsOff)
			f.poolsEnc = sortPrefixes(f.poolsEnc)
		}
	}
	return nil
}

// addBlocks collects the blocks whose affinity is this node, from confirmed
// BlockAffinities and from IPAMBlocks with affinity host:<node>.
func addBlocks(m *model, in Input) error {
	add := func(what, cidr string) error {
		pfx, err := netip.ParsePrefix(cidr)
		if err != nil {
			return fmt.Errorf("%s: cidr %q: %w", what, cidr, err)
		}
		if f := m.fam[famIndex(pfx.Addr())]; f != nil {
			f.blocks = append(f.blocks, pfx.Masked())
		}
		return nil
	}
	for i := range in.Affinities {
		a := &in.Affinities[i]
		if a.Spec.Node != in.NodeName || a.Spec.Deleted || a.Spec.State != v3.BlockAffinityStateConfirmed ||
			a.Spec.Type == v3.BlockAffinityTypeVirtual {
			continue
		}
		if err := add(fmt.Sprintf("BlockAffinity %q", a.Name), a.Spec.CIDR); err != nil {
			return err
		}
	}
	for i := range in.Blocks {
		b := &in.Blocks[i]
		if b.Spec.Deleted || b.Spec.Affinity == nil || *b.Spec.Affinity != "host:"+in.NodeName {
			continue
		}
		if err := add(fmt.Sprintf("IPAMBlock %q", b.Name), b.Spec.CIDR); err != nil {
			return err
		}
	}
	for _, f := range m.fam {
		if f != nil {
			f.blocks = sortPrefixes(f.blocks)
		}
	}
	return nil
}

// addCommunities resolves prefixAdvertisements (community names refer to
// spec.communities) into per-family rules.
func addCommunities(m *model, named []v3.Community, advs []v3.PrefixAdvertisement) error {
	byName := map[string]string{}
	for _, c := range named {
		byName[c.Name] = c.Value
	}
	for _, a := range advs {
		pfx, err := netip.ParsePrefix(a.CIDR)
		if err != nil {
			return fmt.Errorf("BGPConfiguration prefixAdvertisements: cidr %q: %w", a.CIDR, err)
		}
		r := commRule{cidr: pfx.Masked()}
		for _, c := range a.Communities {
			if v, ok := byName[c]; ok {
				c = v
			}
			vals, err := parseCommunity(c)
			if err != nil {
				return fmt.Errorf("BGPConfiguration prefixAdvertisements for %s: %w", a.CIDR, err)
			}
			if len(vals) == 2 {
				r.std = append(r.std, [2]uint32{vals[0], vals[1]})
			} else {
				r.large = append(r.large, [3]uint32{vals[0], vals[1], vals[2]})
			}
		}
		if f := m.fam[famIndex(r.cidr.Addr())]; f != nil && (len(r.std)+len(r.large) > 0) {
			f.comms = append(f.comms, r)
		}
	}
	return nil
}

// parseCommunity parses aa:nn (16-bit parts) or aa:nn:mm (32-bit parts).
func parseCommunity(s string) ([]uint32, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 && len(parts) != 3 {
		return nil, fmt.Errorf("%q is not a community (aa:nn or aa:nn:mm) nor a name from spec.communities", s)
	}
	limit := uint64(1<<16 - 1)
	if len(parts) == 3 {
		limit = 1<<32 - 1
	}
	out := make([]uint32, len(parts))
	for i, p := range parts {
		var v uint64
		if _, err := fmt.Sscanf(p, "%d", &v); err != nil || v > limit || fmt.Sprint(v) != p {
			return nil, fmt.Errorf("%q is not a valid community value", s)
		}
		out[i] = uint32(v)
	}
	return out, nil
}

func sortPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(ps)
}
