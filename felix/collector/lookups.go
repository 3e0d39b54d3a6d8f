package collector

import (
	"net/netip"
	"strconv"
	"strings"
	"sync"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/rules"
)

// Lookups name the endpoints behind IPs and the tiers of policies, from
// the same datastore updates felix's calculation takes (it implements
// datastore.SyncerCallbacks). Safe for concurrent use.
type Lookups struct {
	mu    sync.RWMutex
	byIP  map[netip.Addr]Endpoint
	ipsOf map[datastore.Key][]netip.Addr
	// nets are the (Global)NetworkSets' CIDRs; the longest match names
	// an IP no endpoint holds.
	nets     map[datastore.Key][]netip.Prefix
	netNames map[datastore.Key]Endpoint
	tiers    map[datastore.Key]string
	// owners are the rule owners (policies, profiles) and tiers, for
	// reading back shortened NFLOG prefixes; hashed is built from them
	// on the first shortened prefix after a change.
	owners map[datastore.Key]owner
	hashed map[string]Verdict
	// keyByIP are the workload and host endpoints by address, and
	// inputs what the pending evaluation reads (pending.go).
	keyByIP map[netip.Addr]datastore.Key
	inputs  policyInputs
	// generation counts updates; attrs are the workloads' chains as
	// Reporter worked them out since the last update (under attrMu).
	generation uint64
	attrMu     sync.Mutex
	attrs      map[attributionKey]Attribution
}

// owner is what a shortened prefix may stand for: a policy's or
// profile's rules (IDs as in prefixes, rule counts) or a tier.
type owner struct {
	policy    bool
	v         Verdict // Kind, Namespace, Name (or Tier)
	id        string
	nIn, nOut int
}

// LookupKinds are the kinds Lookups use.
var LookupKinds = []string{v3.KindWorkloadEndpoint, v3.KindHostEndpoint, v3.KindNetworkSet,
	v3.KindGlobalNetworkSet, v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy, v3.KindProfile, v3.KindTier,
	v3.KindStagedNetworkPolicy, v3.KindStagedGlobalNetworkPolicy, v3.KindStagedKubernetesNetworkPolicy}

// NewLookups returns empty Lookups.
func NewLookups() *Lookups {
	return &Lookups{byIP: map[netip.Addr]Endpoint{}, ipsOf: map[datastore.Key][]netip.Addr{},
		nets: map[datastore.Key][]netip.Prefix{}, netNames: map[datastore.Key]Endpoint{}, tiers: map[datastore.Key]string{},
		owners: map[datastore.Key]owner{}, keyByIP: map[netip.Addr]datastore.Key{}, inputs: newPolicyInputs(),
		attrs: map[attributionKey]Attribution{}}
}

// FollowServices makes the pending evaluation follow Kubernetes
// Services as felix's calculation does (daemon.FollowsServices: the
// Kubernetes datastore): the EndpointSlices it is handed select the
// endpoints of rules' services matches. Call it before the first update.
func (l *Lookups) FollowServices() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inputs.services = true
}

// OnStatusUpdated implements datastore.SyncerCallbacks.
func (l *Lookups) OnStatusUpdated(datastore.SyncStatus) {}

// OnUpdates implements datastore.SyncerCallbacks.
func (l *Lookups) OnUpdates(ups []datastore.Update) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.generation++
	l.attrMu.Lock()
	clear(l.attrs)
	l.attrMu.Unlock()
	for _, u := range ups {
		l.forget(u.Key)
		l.inputs.update(u)
		if u.Type == datastore.EventDeleted || u.Object == nil {
			continue
		}
		switch o := u.Object.(type) {
		case *v3.WorkloadEndpoint:
			name := o.Spec.Pod
			if name == "" {
				name = o.Spec.Workload
			}
			l.remember(u.Key, Endpoint{Kind: "wep", Namespace: o.Namespace, Name: name}, o.Spec.IPNetworks)
		case *v3.HostEndpoint:
			l.remember(u.Key, Endpoint{Kind: "hep", Name: o.Name}, o.Spec.ExpectedIPs)
		case *v3.NetworkSet:
			l.rememberNets(u.Key, Endpoint{Kind: "ns", Namespace: o.Namespace, Name: o.Name}, o.Spec.Nets)
		case *v3.GlobalNetworkSet:
			l.rememberNets(u.Key, Endpoint{Kind: "gns", Name: o.Name}, o.Spec.Nets)
		case *v3.NetworkPolicy:
			l.tiers[u.Key] = tierOr(o.Spec.Tier)
			v := Verdict{Kind: "np", Namespace: o.Namespace, Name: o.Name}
			if name, ok := strings.CutPrefix(o.Name, rules.KubernetesPolicyPrefix); ok {
				v.Kind, v.Name = "knp", name
			}
			l.owners[u.Key] = owner{policy: true, v: v, id: v.Kind + "/" + o.Namespace + "/" + v.Name, nIn: len(o.Spec.Ingress), nOut: len(o.Spec.Egress)}
		case *v3.GlobalNetworkPolicy:
			l.tiers[u.Key] = tierOr(o.Spec.Tier)
			v := Verdict{Kind: "gnp", Name: o.Name}
			if name, ok := strings.CutPrefix(o.Name, rules.ClusterPolicyPrefix); ok {
				v.Kind, v.Name = "kcnp", name
			}
			l.owners[u.Key] = owner{policy: true, v: v, id: v.Kind + "/" + v.Name, nIn: len(o.Spec.Ingress), nOut: len(o.Spec.Egress)}
		case *v3.Profile:
			l.owners[u.Key] = owner{v: Verdict{Name: o.Name}, id: o.Name, nIn: len(o.Spec.Ingress), nOut: len(o.Spec.Egress)}
		case *v3.Tier:
			l.owners[u.Key] = owner{v: Verdict{Tier: o.Name}, id: o.Name}
		}
		l.hashed = nil
	}
}

func tierOr(t string) string {
	if t == "" {
		return v3.DefaultTierName
	}
	return t
}

func (l *Lookups) forget(k datastore.Key) {
	for _, ip := range l.ipsOf[k] {
		delete(l.byIP, ip)
		if l.keyByIP[ip] == k {
			delete(l.keyByIP, ip)
		}
	}
	delete(l.ipsOf, k)
	delete(l.nets, k)
	delete(l.netNames, k)
	delete(l.tiers, k)
	delete(l.owners, k)
}

func (l *Lookups) remember(k datastore.Key, ep Endpoint, cidrs []string) {
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			a, err2 := netip.ParseAddr(c)
			if err2 != nil {
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		l.byIP[p.Addr()] = ep
		l.keyByIP[p.Addr()] = k
		l.ipsOf[k] = append(l.ipsOf[k], p.Addr())
	}
}

func (l *Lookups) rememberNets(k datastore.Key, ep Endpoint, cidrs []string) {
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			l.nets[k] = append(l.nets[k], p.Masked())
		}
	}
	l.netNames[k] = ep
}

// Endpoint implements Resolver: a workload or host endpoint holding ip,
// else the network set with the longest matching net, else Calico's
// aggregated "pvt" (private) or "pub" network.
func (l *Lookups) Endpoint(ip string) Endpoint {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return Endpoint{Kind: "net", Name: "pub"}
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if ep, ok := l.byIP[a]; ok {
		return ep
	}
	best, bits := Endpoint{}, -1
	for k, nets := range l.nets {
		for _, n := range nets {
			if n.Contains(a) && n.Bits() > bits {
				best, bits = l.netNames[k], n.Bits()
			}
		}
	}
	if bits >= 0 {
		return best
	}
	if a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return Endpoint{Kind: "net", Name: "pvt"}
	}
	return Endpoint{Kind: "net", Name: "pub"}
}

// PolicyTier implements Resolver.
func (l *Lookups) PolicyTier(kind, namespace, name string) string {
	k := datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: namespace, Name: name}
	switch kind {
	case "gnp":
		k = datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: name}
	case "kcnp":
		k = datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: rules.ClusterPolicyPrefix + name}
	case "knp":
		k.Name = "knp.default." + name
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if t, ok := l.tiers[k]; ok {
		return t
	}
	if kind == "knp" {
		return v3.DefaultTierName
	}
	return ""
}

// Unhash reads a shortened NFLOG prefix back: the policy or profile rule
// or tier it stands for (found by shortening every known owner's long
// prefixes, once per change of owners), or false when none is known.
func (l *Lookups) Unhash(prefix string) (Verdict, bool) {
	l.mu.RLock()
	v, ok := l.hashed[prefix]
	built := l.hashed != nil
	l.mu.RUnlock()
	if built {
		return v, ok
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hashed == nil {
		l.hashed = map[string]Verdict{}
		for _, o := range l.owners {
			o.addHashed(l.hashed)
		}
	}
	v, ok = l.hashed[prefix]
	return v, ok
}

// addHashed adds the owner's prefixes that are shortened.
func (o owner) addHashed(into map[string]Verdict) {
	const long = rules.NFLOGPrefixMaxLength - 1
	if o.policy || o.v.Tier == "" { // rules of a policy or profile
		kind, ownerName := rules.OwnerPolicy, "policy"
		if !o.policy {
			kind, ownerName = rules.OwnerProfile, "profile"
		}
		for _, dir := range []struct {
			b       byte
			n       int
			ingress bool
		}{{rules.DirIngress, o.nIn, true}, {rules.DirEgress, o.nOut, false}} {
			for idx := range dir.n {
				if len(o.id)+len(strconv.Itoa(idx))+4 < long {
					continue
				}
				for _, a := range []struct {
					b    byte
					name string
				}{{rules.VerdictAllow, "Allow"}, {rules.VerdictDeny, "Deny"}, {rules.VerdictPass, "Pass"}} {
					p := rules.NFLOGPrefix(a.b, kind, dir.b, idx, o.id)
					v := o.v
					v.Action, v.Owner, v.Ingress, v.RuleIndex, v.Prefix, v.Hashed = a.name, ownerName, dir.ingress, idx, p, true
					into[p] = v
				}
			}
		}
		return
	}
	if len(o.id)+4 < long {
		return
	}
	for _, dir := range []byte{rules.DirIngress, rules.DirEgress} {
		p := rules.EndOfTierNFLOGPrefix(dir, o.id)
		into[p] = Verdict{Action: "Deny", Owner: "policy", EndOfTier: true, Tier: o.id, Ingress: dir == rules.DirIngress,
			RuleIndex: -1, Prefix: p, Hashed: true}
	}
}

// Pending implements Resolver: the pending path of a flow reported at a
// workload of node (the destination for an ingress report, the source
// for an egress one), false when that end is no workload of node.
func (l *Lookups) Pending(node string, ingress bool, t Tuple) ([]PolicyHit, bool) {
	at := t.Src
	if ingress {
		at = t.Dst
	}
	l.mu.RLock()
	ep, ok := l.keyByIP[at]
	if !ok || !l.inputs.localWorkload(node, ep) {
		l.mu.RUnlock()
		return nil, false
	}
	var holders []datastore.Key
	for _, a := range []netip.Addr{t.Src, t.Dst} {
		if k, ok := l.keyByIP[a]; ok {
			holders = append(holders, k)
		}
	}
	in := l.inputs.input(node, ep, holders)
	l.mu.RUnlock()
	// The objects are never modified once delivered: the evaluation
	// runs without the lock.
	return evaluate(in, ep, ingress, t)
}
