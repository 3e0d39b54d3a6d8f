package collector

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Resolver names what the aggregator sees: the endpoint behind an IP and
// the tier of a policy. Lookups is the real one.
type Resolver interface {
	Endpoint(ip string) Endpoint
	// PolicyTier is the tier of the policy (kind gnp, np or knp as in
	// NFLOG prefixes), "" when unknown.
	PolicyTier(kind, namespace, name string) string
	// Unhash reads a shortened prefix back (see Lookups.Unhash).
	Unhash(prefix string) (Verdict, bool)
	// Pending is the pending path (staged policies as if enforced) of a
	// flow reported at a workload of node, false when the reporting end
	// is no workload of node (see pending.go).
	Pending(node string, ingress bool, t Tuple) ([]PolicyHit, bool)
	// Reporter is what a flow reported at node keeps of a path logged
	// for tuple t, false when node reports no flow for it (see
	// attribute.go).
	Reporter(node string, ingress bool, t Tuple) (Attribution, bool)
}

// Aggregator gathers verdicts and connection counts per flow key for one
// flush interval. It is not safe for concurrent use: one goroutine feeds
// it packets, conntrack dumps and flushes (see Run).
type Aggregator struct {
	node     string
	resolve  Resolver
	counters *RuleCounters // may be nil
	log      *slog.Logger

	// paths are the hits logged so far for a packet whose final verdict
	// (Allow or Deny) has not come yet.
	paths map[dirTuple][]Verdict
	// flows are this interval's flows by key.
	flows map[FlowKey]*Flow
	// conns are the allowed connections known from their first packet,
	// by tuple and direction, until conntrack no longer has them.
	conns map[dirTuple]*conn
	start time.Time
	// ParseErrors counts NFLOG prefixes that did not parse; Created the
	// flows (keys of an interval) created.
	ParseErrors, Created int
	// EvaluatePending: each flow of an interval carries its pending
	// policies (FlowLogsPolicyEvaluationMode Continuous), evaluated when
	// the flow is created in the interval.
	EvaluatePending bool
}

type dirTuple struct {
	Tuple
	ingress bool
}

type conn struct {
	key FlowKey
	// hits are the flow's (attributed); counted the whole path, for the
	// rule counters.
	hits, counted  []PolicyHit
	packets, bytes uint64
}

// NewAggregator returns an Aggregator whose first interval starts at now.
func NewAggregator(node string, resolve Resolver, counters *RuleCounters, log *slog.Logger, now time.Time) *Aggregator {
	if log == nil {
		log = slog.Default()
	}
	return &Aggregator{node: node, resolve: resolve, counters: counters, log: log,
		paths: map[dirTuple][]Verdict{}, flows: map[FlowKey]*Flow{}, conns: map[dirTuple]*conn{}, start: now}
}

// Add takes one NFLOG message of group 1 (ingress) or 2 (egress).
func (a *Aggregator) Add(ingress bool, p Packet) {
	v, err := ParsePrefix(p.Prefix)
	if err != nil {
		a.ParseErrors++
		a.log.Debug("unparsable NFLOG prefix", "error", err)
		return
	}
	if v.Hashed {
		if u, ok := a.resolve.Unhash(p.Prefix); ok {
			v = u
		}
	}
	k := dirTuple{p.Tuple, ingress}
	path := append(a.paths[k], v)
	if v.Action == "Pass" {
		if len(path) > 64 { // a runaway path: never grow without bound
			path = path[1:]
		}
		a.paths[k] = path
		return
	}
	delete(a.paths, k)
	counted := a.hits(path)
	attr, report := a.resolve.Reporter(a.node, ingress, p.Tuple)
	hits, report := attributedIf(counted, attr, report)
	if v.Action == "Deny" {
		a.counters.add(counted, ingress, 1, uint64(p.Bytes), 0)
		if report {
			f := a.flow(a.key(p.Tuple, ingress, v.Action, hits), hits, k)
			f.Packets++
			f.Bytes += uint64(p.Bytes)
		}
		return
	}
	// Allow: the connection's first packet. Its counts come from
	// conntrack; a repeated first packet (a retransmitted SYN before
	// the entry was confirmed) is the same connection. A path that is
	// no flow of this node (a host endpoint's chain) counts its
	// connection only.
	if !report {
		a.counters.add(counted, ingress, 0, 0, 1)
		return
	}
	key := a.key(p.Tuple, ingress, v.Action, hits)
	f := a.flow(key, hits, k)
	if c, ok := a.conns[k]; ok && c.key == key {
		return
	}
	f.ConnectionsStarted++
	a.conns[k] = &conn{key: key, hits: hits, counted: counted}
	a.counters.add(counted, ingress, 0, 0, 1)
}

func attributedIf(hits []PolicyHit, a Attribution, report bool) ([]PolicyHit, bool) {
	if !report {
		return nil, false
	}
	return attributed(hits, a)
}

// hits turns a path's verdicts into policy hits, naming tiers.
func (a *Aggregator) hits(path []Verdict) []PolicyHit {
	out := make([]PolicyHit, 0, len(path))
	for i, v := range path {
		h := PolicyHit{Index: i, Action: v.Action, RuleIndex: v.RuleIndex, Name: v.Name, Namespace: v.Namespace}
		switch {
		case v.EndOfTier:
			h.Kind, h.Tier = "eot", v.Tier
		case v.NoProfile:
			h.Kind, h.Tier = "pro", ProfileTier
		case v.Owner == "profile":
			h.Kind, h.Tier = "pro", ProfileTier
		default:
			h.Kind, h.Tier = v.Kind, a.resolve.PolicyTier(v.Kind, v.Namespace, v.Name)
		}
		out = append(out, h)
	}
	return out
}

// ProfileTier is the tier name of profile hits (Calico's).
const ProfileTier = "__PROFILE__"

func (a *Aggregator) key(t Tuple, ingress bool, action string, hits []PolicyHit) FlowKey {
	k := FlowKey{
		Source: a.resolve.Endpoint(t.Src.String()), Dest: a.resolve.Endpoint(t.Dst.String()),
		SourceIP: t.Src.String(), DestIP: t.Dst.String(), DestPort: t.DstPort,
		Proto: protoName(t.Proto), Reporter: "Src", Action: action, Policies: hitPath(hits),
	}
	if ingress {
		k.Reporter = "Dst"
	}
	return k
}

func hitPath(hits []PolicyHit) string {
	parts := make([]string, len(hits))
	for i, h := range hits {
		parts[i] = strings.Join([]string{h.Kind, h.Tier, h.Namespace, h.Name, strconv.Itoa(h.RuleIndex), h.Action}, "/")
	}
	return strings.Join(parts, ";")
}

// flow is key's flow of this interval, created (with its pending
// policies, evaluated for the tuple k) when new.
func (a *Aggregator) flow(key FlowKey, hits []PolicyHit, k dirTuple) *Flow {
	f := a.flows[key]
	if f == nil {
		f = &Flow{FlowKey: key, Enforced: hits, Pending: []PolicyHit{}, Node: a.node}
		if a.EvaluatePending {
			if p, ok := a.resolve.Pending(a.node, k.ingress, k.Tuple); ok {
				f.Pending = p
			}
		}
		a.flows[key] = f
		a.Created++
	}
	return f
}

// Tracked is the number of allowed connections followed in conntrack.
func (a *Aggregator) Tracked() int { return len(a.conns) }

// Conntrack takes a dump of the conntrack table: each known allowed
// connection's counts grow by what conntrack counted since the last dump;
// a known connection missing from the dump has completed. byTuple holds
// each entry under its original tuple and, when NAT changed it, under
// the tuple as the policy saw it (after DNAT) as well.
func (a *Aggregator) Conntrack(byTuple map[Tuple]Conn) {
	for k, c := range a.conns {
		e, ok := byTuple[k.Tuple]
		f := a.flow(c.key, c.hits, k)
		if !ok {
			f.ConnectionsCompleted++
			delete(a.conns, k)
			continue
		}
		dp, db := sub(e.Packets, c.packets), sub(e.Bytes, c.bytes)
		c.packets, c.bytes = e.Packets, e.Bytes
		f.Packets += dp
		f.Bytes += db
		a.counters.add(c.counted, k.ingress, dp, db, 0)
	}
}

func sub(now, before uint64) uint64 {
	if now < before { // a new entry under the same tuple
		return now
	}
	return now - before
}

// Flush ends the interval at now: it returns the interval's flows (and a
// flow for each key with connections still live), sorted, and starts the
// next interval.
func (a *Aggregator) Flush(now time.Time) []Flow {
	live := map[FlowKey]int{}
	for k, c := range a.conns {
		live[c.key]++
		a.flow(c.key, c.hits, k)
	}
	out := make([]Flow, 0, len(a.flows))
	for key, f := range a.flows {
		f.StartTime, f.EndTime = a.start, now
		f.ConnectionsLive = live[key]
		out = append(out, *f)
	}
	slices.SortFunc(out, func(x, y Flow) int { return compareKeys(x.FlowKey, y.FlowKey) })
	a.flows = map[FlowKey]*Flow{}
	// A path is a packet's verdicts, logged within microseconds; one
	// still open at a flush never got a final verdict here (a Pass in a
	// preDNAT chain, whose filter chains decide later): drop it.
	clear(a.paths)
	a.start = now
	return out
}

func compareKeys(x, y FlowKey) int {
	for _, p := range [][2]string{
		{x.Source.Namespace, y.Source.Namespace}, {x.Source.Name, y.Source.Name},
		{x.Dest.Namespace, y.Dest.Namespace}, {x.Dest.Name, y.Dest.Name},
		{x.SourceIP, y.SourceIP}, {x.DestIP, y.DestIP}, {x.Proto, y.Proto},
		{x.Reporter, y.Reporter}, {x.Action, y.Action}, {x.Policies, y.Policies},
	} {
		if c := strings.Compare(p[0], p[1]); c != 0 {
			return c
		}
	}
	return int(x.DestPort) - int(y.DestPort)
}

func itoa(i int) string { return strconv.Itoa(i) }
