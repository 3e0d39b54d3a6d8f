package cluster

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The pure part of the chaos run (chaos.go): the address-overlap tracker,
// the per-fault figures and the closing invariant lines. No clock of its
// own: callers pass the times.

// dupGrace is how long two live pods may show the same address in the
// API before it counts as a duplicate: kubelet reports a recreated
// sandbox's new address a moment after the old one was released and
// possibly given to another pod on the node, so a shorter overlap is the
// API's lag, not two pods holding one address.
const dupGrace = 3 * time.Second

// podAddr is one live pod's address as the API shows it.
type podAddr struct{ Pod, IP string }

// Overlap is two live pods shown with one address, from From for Dur.
type Overlap struct {
	IP, A, B string
	From     time.Time
	Dur      time.Duration
	Phase    string
}

// dupTracker follows address overlaps between live pods over successive
// snapshots.
type dupTracker struct {
	open   map[string]*Overlap // "ip a b" (a < b)
	closed []Overlap
	pods   map[string]bool // every live pod seen
}

func newDupTracker() *dupTracker {
	return &dupTracker{open: map[string]*Overlap{}, pods: map[string]bool{}}
}

// Update takes the live pods at now, opening an overlap for each address
// newly held by two of them and closing those that ended.
func (d *dupTracker) Update(now time.Time, phase string, live []podAddr) {
	byIP := map[string][]string{}
	for _, p := range live {
		byIP[p.IP] = append(byIP[p.IP], p.Pod)
		d.pods[p.Pod] = true
	}
	seen := map[string]bool{}
	for ip, pods := range byIP {
		sort.Strings(pods)
		for i := range pods {
			for j := i + 1; j < len(pods); j++ {
				k := ip + " " + pods[i] + " " + pods[j]
				seen[k] = true
				if d.open[k] == nil {
					d.open[k] = &Overlap{IP: ip, A: pods[i], B: pods[j], From: now, Phase: phase}
				}
			}
		}
	}
	for k, o := range d.open {
		if !seen[k] {
			o.Dur = now.Sub(o.From)
			d.closed = append(d.closed, *o)
			delete(d.open, k)
		}
	}
}

// Overlaps are every overlap so far (open ones up to now), and how many
// of them lasted dupGrace or longer.
func (d *dupTracker) Overlaps(now time.Time) (all []Overlap, dups int) {
	all = append(all, d.closed...)
	for _, o := range d.open {
		c := *o
		c.Dur = now.Sub(c.From)
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].From.Before(all[j].From) })
	for _, o := range all {
		if o.Dur >= dupGrace {
			dups++
		}
	}
	return all, dups
}

// FaultResult is what one fault did, as measured.
type FaultResult struct {
	Fault string
	// Ready is from the fault's end (agent killed or deleted, power
	// restored, datastore restarted, node re-added) until every node,
	// agent and test pod is ready again; Detail adds the fault's own
	// figures (the roll's two durations).
	Ready    time.Duration
	ReadyErr string
	Detail   string
	// During the fault's phase (fault, recovery, settling).
	Created, Deleted  int
	Overlaps, Dups    int
	Probes, Forbidden int
	StreamBroken      string
	// Leaks found once settled, after waiting up to the GC bound;
	// Settle is how long until none were left.
	Leaks  []string
	Settle time.Duration
}

// Line is the fault's one-line summary.
func (f FaultResult) Line() string {
	ready := fmt.Sprintf("ready again in %.1f s", f.Ready.Seconds())
	if f.ReadyErr != "" {
		ready = "NOT ready: " + f.ReadyErr
	}
	stream := "stream between other nodes unbroken"
	if f.StreamBroken != "" {
		stream = "stream BROKEN: " + f.StreamBroken
	}
	leaks := fmt.Sprintf("0 leaks after GC (clean %.1f s after settling)", f.Settle.Seconds())
	if len(f.Leaks) > 0 {
		leaks = fmt.Sprintf("%d LEAKS after GC: %s", len(f.Leaks), strings.Join(f.Leaks, "; "))
	}
	detail := ""
	if f.Detail != "" {
		detail = " (" + f.Detail + ")"
	}
	return fmt.Sprintf("%s: %s%s; %d pods created, %d deleted; %d duplicates (%d shorter API overlaps); %s; %d forbidden connections of %d probes; %s",
		f.Fault, ready, detail, f.Created, f.Deleted, f.Dups, f.Overlaps-f.Dups, stream, f.Forbidden, f.Probes, leaks)
}

// Invariant is one closing line of the run.
type Invariant struct {
	Name   string
	OK     bool
	Figure string // when OK
	What   string // when violated
}

func (i Invariant) String() string {
	if i.OK {
		return fmt.Sprintf("invariant %s: OK (%s)", i.Name, i.Figure)
	}
	return fmt.Sprintf("invariant %s: VIOLATED (%s)", i.Name, i.What)
}

// ChaosSummary is the whole run's measurements, for the invariants.
type ChaosSummary struct {
	Target, Created, Deleted int
	PodsSeen                 int
	Overlaps                 []Overlap
	StreamRequests           int
	StreamSpan               time.Duration
	StreamBroken             string
	Probes, Forbidden        int
	ForbiddenFirst           string
	Faults                   []FaultResult
	FinalLeaks               []string
	Elapsed                  time.Duration
}

// Invariants judges the run: one line each, all OK or the run failed.
func (s ChaosSummary) Invariants() []Invariant {
	var out []Invariant
	out = append(out, s.churnInvariant(), s.dupInvariant())
	out = append(out, Invariant{Name: "stream-unbroken", OK: s.StreamBroken == "" && s.StreamRequests > 0,
		Figure: fmt.Sprintf("%d requests on one TCP connection between pods on node-2 and node-1 over %s", s.StreamRequests, s.StreamSpan.Round(time.Second)),
		What:   fmt.Sprintf("after %d requests: %s", s.StreamRequests, orNone(s.StreamBroken, "no request answered"))})
	out = append(out, Invariant{Name: "no-forbidden-connection", OK: s.Forbidden == 0 && s.Probes > 0,
		Figure: fmt.Sprintf("%d probes into and out of the default-deny namespace every 100 ms, 0 got through", s.Probes),
		What:   fmt.Sprintf("%d of %d probes got through; first: %s", s.Forbidden, s.Probes, orNone(s.ForbiddenFirst, "no probe ran"))})
	out = append(out, s.leakInvariant(), s.readyInvariant())
	return out
}

func (s ChaosSummary) churnInvariant() Invariant {
	return Invariant{Name: "churn", OK: s.Created >= s.Target && s.Deleted >= s.Created && s.Target > 0,
		Figure: fmt.Sprintf("%d pod creations and %d deletions through the API in %s", s.Created, s.Deleted, s.Elapsed.Round(time.Second)),
		What:   fmt.Sprintf("%d of %d pod creations, %d deletions", s.Created, s.Target, s.Deleted)}
}

func (s ChaosSummary) dupInvariant() Invariant {
	var bad []string
	longest := time.Duration(0)
	for _, o := range s.Overlaps {
		if o.Dur >= dupGrace {
			bad = append(bad, fmt.Sprintf("%s held by %s and %s for %s during %s", o.IP, o.A, o.B, o.Dur.Round(100*time.Millisecond), o.Phase))
		}
		longest = max(longest, o.Dur)
	}
	return Invariant{Name: "no-duplicate-address", OK: len(bad) == 0,
		Figure: fmt.Sprintf("%d live pods watched, 0 addresses held by two; %d API overlaps shorter than %s, longest %s",
			s.PodsSeen, len(s.Overlaps), dupGrace, longest.Round(100*time.Millisecond)),
		What: strings.Join(bad, "; ")}
}

func (s ChaosSummary) leakInvariant() Invariant {
	var bad []string
	for _, f := range s.Faults {
		for _, l := range f.Leaks {
			bad = append(bad, f.Fault+": "+l)
		}
	}
	for _, l := range s.FinalLeaks {
		bad = append(bad, "final: "+l)
	}
	return Invariant{Name: "no-leaks", OK: len(bad) == 0,
		Figure: fmt.Sprintf("0 leaked addresses, blocks, handles, WorkloadEndpoints, veths, routes or chains after each of %d faults and at the end", len(s.Faults)),
		What:   strings.Join(bad, "; ")}
}

func (s ChaosSummary) readyInvariant() Invariant {
	var figs, bad []string
	for _, f := range s.Faults {
		if f.ReadyErr != "" {
			bad = append(bad, f.Fault+": "+f.ReadyErr)
			continue
		}
		figs = append(figs, fmt.Sprintf("%s %.1f s", f.Fault, f.Ready.Seconds()))
	}
	return Invariant{Name: "ready-after-each-fault", OK: len(bad) == 0 && len(s.Faults) > 0,
		Figure: strings.Join(figs, ", "), What: orNone(strings.Join(bad, "; "), "no fault ran")}
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}
