package calc

import (
	"fmt"
	"maps"
	"net/netip"
	"strings"

	"github.com/tabbynet/tabby/api/numorstring"
	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// The per-object loaders: each turns one resource into what the
// calculation keeps of it, with the problems that made it (or part of it)
// skipped and the rules it cannot render as written. They are pure and
// read nothing but their arguments. Compute and the Engine load every
// object through them, so bad input and the fail-closed conversion are
// the same on both paths.

// newProblem is the one constructor of a Problem.
func newProblem(kind, ns, name, format string, args ...any) Problem {
	return Problem{Kind: kind, Namespace: ns, Name: name, Reason: fmt.Sprintf(format, args...)}
}

// tierInfo is an effective tier: what a policy's place in the
// evaluation order and its tier's default action come from.
type tierInfo struct {
	name   string
	order  *float64
	action v3.Action
}

// builtInTier is the tier name has without a Tier object (nil for a name
// that is not a built-in tier).
func builtInTier(name string) *tierInfo {
	for _, t := range v3.DefaultTiers() {
		if t.Name == name {
			return &tierInfo{name: t.Name, order: t.Spec.Order, action: *t.Spec.DefaultAction}
		}
	}
	return nil
}

// builtInTiers are the effective tiers before any Tier object.
func builtInTiers() map[string]*tierInfo {
	out := map[string]*tierInfo{}
	for _, t := range v3.DefaultTiers() {
		out[t.Name] = builtInTier(t.Name)
	}
	return out
}

// loadTier returns a Tier object's effective tier, or nil and the
// problem that has it skipped.
func loadTier(t *v3.Tier) (*tierInfo, []Problem) {
	if err := t.Validate().Err(); err != nil {
		return nil, []Problem{newProblem(v3.KindTier, "", t.Name, "invalid, skipped: %v", err)}
	}
	ti := &tierInfo{name: t.Name, order: t.Spec.Order, action: v3.Deny}
	if t.Spec.DefaultAction != nil {
		ti.action = *t.Spec.DefaultAction
	}
	return ti, nil
}

// loadProfile returns the problem that has an invalid profile skipped
// (none for a valid one). A valid profile's rules are converted by
// convertProfile, only while a local endpoint uses it.
func loadProfile(p *v3.Profile) []Problem {
	if err := p.Validate().Err(); err != nil {
		return []Problem{newProblem(v3.KindProfile, "", p.Name, "invalid, skipped: %v", err)}
	}
	return nil
}

// labelled is anything ipset membership is computed over: an endpoint
// (workload or host, local or remote) or a network set (an "item").
type labelled struct {
	labels map[string]string
	// shared is the Engine's interned copy of labels (nil in Compute):
	// it remembers which selectors match those labels.
	shared *sharedLabels
	nets   []netip.Prefix
	// netStrs are nets as ipset members, formatted once per object.
	netStrs []string
	ports   []namedPort
}

type namedPort struct {
	name  string
	proto uint8
	port  uint16
}

// localEndpoint is a local endpoint as loaded: its Endpoint without tier
// lists, and the labels policies select it by.
type localEndpoint struct {
	ep     Endpoint
	labels map[string]string
}

// itemEnv is what loading an item reads besides the item: the node felix
// runs on and the valid profiles by name.
type itemEnv struct {
	node     string
	profiles map[string]*v3.Profile
}

// loadedItem is what one endpoint or network set contributes: its labels
// and members (nil when skipped), its local endpoint (local endpoints
// only) and its problems.
type loadedItem struct {
	member   *labelled
	local    *localEndpoint
	problems []Problem
}

// loadItem loads an endpoint or network set (nil, or another kind, loads
// as nothing).
func (env itemEnv) loadItem(o any) loadedItem {
	switch o := o.(type) {
	case *v3.WorkloadEndpoint:
		return env.loadWEP(o)
	case *v3.HostEndpoint:
		return env.loadHEP(o)
	case *v3.NetworkSet:
		return env.loadNetworkSet(o)
	case *v3.GlobalNetworkSet:
		return loadGlobalNetworkSet(o)
	}
	return loadedItem{}
}

// skipped is the loadedItem of an item skipped for the reason given.
func skipped(kind, ns, name, format string, args ...any) loadedItem {
	return loadedItem{problems: []Problem{newProblem(kind, ns, name, format, args...)}}
}

func (env itemEnv) loadWEP(w *v3.WorkloadEndpoint) loadedItem {
	kind := v3.KindWorkloadEndpoint
	local := w.Spec.Node == env.node
	// A local endpoint's fields end up in rules (interface name), so it
	// must be fully valid; of a remote one only the labels, IPs and ports
	// are used, and those are checked where used.
	if local {
		if err := w.Validate().Err(); err != nil {
			return skipped(kind, w.Namespace, w.Name, "invalid, skipped: %v", err)
		}
	}
	nets, err := parseNets(w.Spec.IPNetworks)
	if err != nil {
		return skipped(kind, w.Namespace, w.Name, "skipped: %v", err)
	}
	labels := inheritLabels(env.profiles, w.Namespace, w.Labels, w.Spec.Profiles)
	if _, ok := labels[saLabelPrefix+nameLabel]; !ok && w.Spec.ServiceAccountName != "" {
		labels[saLabelPrefix+nameLabel] = w.Spec.ServiceAccountName
	}
	var ports []namedPort
	for _, p := range w.Spec.Ports {
		ports = appendNamedPort(ports, p.Name, p.Protocol, p.Port)
	}
	out := loadedItem{member: &labelled{labels: labels, nets: nets, netStrs: prefixStrings(nets), ports: ports}}
	if local { // missing profiles are reported for local endpoints only
		out.problems = missingProfiles(env.profiles, kind, w.Namespace, w.Name, w.Spec.Profiles)
		out.local = &localEndpoint{labels: labels, ep: Endpoint{
			Kind: Workload, Key: w.Namespace + "/" + w.Name, Interface: w.Spec.InterfaceName,
			Addrs: nets, Profiles: existingProfiles(env.profiles, w.Spec.Profiles),
		}}
	}
	return out
}

func (env itemEnv) loadHEP(h *v3.HostEndpoint) loadedItem {
	kind := v3.KindHostEndpoint
	if err := h.Validate().Err(); err != nil {
		return skipped(kind, "", h.Name, "invalid, skipped: %v", err)
	}
	nets, err := parseNets(h.Spec.ExpectedIPs)
	if err != nil {
		return skipped(kind, "", h.Name, "skipped: %v", err)
	}
	labels := inheritLabels(env.profiles, "", h.Labels, h.Spec.Profiles)
	var ports []namedPort
	for _, p := range h.Spec.Ports {
		ports = appendNamedPort(ports, p.Name, p.Protocol, p.Port)
	}
	out := loadedItem{member: &labelled{labels: labels, nets: nets, netStrs: prefixStrings(nets), ports: ports}}
	if h.Spec.Node == env.node {
		out.problems = missingProfiles(env.profiles, kind, "", h.Name, h.Spec.Profiles)
		out.local = &localEndpoint{labels: labels, ep: Endpoint{
			Kind: Host, Key: h.Name, Interface: h.Spec.InterfaceName,
			Addrs: nets, Profiles: existingProfiles(env.profiles, h.Spec.Profiles),
		}}
	}
	return out
}

// loadNetworkSet loads a NetworkSet, which inherits the labels of its
// namespace's kns. profile.
func (env itemEnv) loadNetworkSet(s *v3.NetworkSet) loadedItem {
	kind := v3.KindNetworkSet
	if err := s.Validate().Err(); err != nil {
		return skipped(kind, s.Namespace, s.Name, "invalid, skipped: %v", err)
	}
	nets, err := parseNets(s.Spec.Nets)
	if err != nil {
		return skipped(kind, s.Namespace, s.Name, "skipped: %v", err)
	}
	labels := inheritLabels(env.profiles, s.Namespace, s.Labels, []string{"kns." + s.Namespace})
	return loadedItem{member: &labelled{labels: labels, nets: nets, netStrs: prefixStrings(nets)}}
}

func loadGlobalNetworkSet(s *v3.GlobalNetworkSet) loadedItem {
	kind := v3.KindGlobalNetworkSet
	if err := s.Validate().Err(); err != nil {
		return skipped(kind, "", s.Name, "invalid, skipped: %v", err)
	}
	nets, err := parseNets(s.Spec.Nets)
	if err != nil {
		return skipped(kind, "", s.Name, "skipped: %v", err)
	}
	return loadedItem{member: &labelled{labels: maps.Clone(s.Labels), nets: nets, netStrs: prefixStrings(nets)}}
}

// itemProfiles are the profiles an item's labels inherit from (o as the
// Engine holds it).
func itemProfiles(o any) []string {
	switch o := o.(type) {
	case *v3.WorkloadEndpoint:
		return o.Spec.Profiles
	case *remoteWEP:
		return o.profiles
	case *v3.HostEndpoint:
		return o.Spec.Profiles
	case *v3.NetworkSet:
		return []string{"kns." + o.Namespace}
	}
	return nil
}

// inheritLabels builds an item's effective labels: its profiles'
// labelsToApply (earlier profiles win), then its own labels, then the
// implicit namespace labels.
func inheritLabels(profiles map[string]*v3.Profile, ns string, own map[string]string, names []string) map[string]string {
	labels := map[string]string{}
	for i := len(names) - 1; i >= 0; i-- {
		if p, ok := profiles[names[i]]; ok {
			maps.Copy(labels, p.Spec.LabelsToApply)
		}
	}
	maps.Copy(labels, own)
	if ns != "" {
		labels[selector.NamespaceLabel] = ns
		if _, ok := labels[nsLabelPrefix+nameLabel]; !ok {
			labels[nsLabelPrefix+nameLabel] = ns
		}
	}
	return labels
}

// existingProfiles returns the named profiles that exist, in order.
func existingProfiles(profiles map[string]*v3.Profile, names []string) []string {
	var found []string
	for _, name := range names {
		if _, ok := profiles[name]; ok {
			found = append(found, name)
		}
	}
	return found
}

// missingProfiles reports each named profile that does not exist.
func missingProfiles(profiles map[string]*v3.Profile, kind, ns, name string, names []string) []Problem {
	var out []Problem
	for _, pn := range names {
		if _, ok := profiles[pn]; !ok {
			out = append(out, newProblem(kind, ns, name, "profile %q does not exist; ignored", pn))
		}
	}
	return out
}

// appendNamedPort appends an endpoint's port to ports when it can be an
// ipset member (a protocol with ports, a port number).
func appendNamedPort(ports []namedPort, name string, proto numorstring.Protocol, port uint16) []namedPort {
	if !proto.SupportsPorts() || port == 0 {
		return ports
	}
	return append(ports, namedPort{name: name, proto: proto.Number(), port: port})
}

func parseNets(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		var p netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(s)
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP or CIDR", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func prefixStrings(nets []netip.Prefix) []string {
	out := make([]string, len(nets))
	for i, n := range nets {
		out[i] = n.String()
	}
	return out
}
