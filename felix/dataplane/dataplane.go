package dataplane

import (
	"github.com/tabbynet/tabby/felix/health"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tabbynet/tabby/felix/rules"
)

// Config configures a Dataplane.
type Config struct {
	Runner Runner
	// V4 and V6 are the iptables backends; a zero V6 disables IPv6.
	V4, V6 Backend
	// RefreshInterval is how often the kernel is re-read to repair drift
	// (0: never).
	RefreshInterval time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failure.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	// Metrics, if set, records syncs.
	Metrics *Metrics
	// AppendHooks puts felix's rules in the base chains (INPUT, FORWARD,
	// ...) at their end instead of their top (ChainInsertMode Append).
	AppendHooks bool
	// Health, if set, is told when each sync starts and ends (a sync that
	// never ends fails liveness).
	Health *health.Loop
	// OnApplied, if set, is called after each successful Apply with the
	// generation (see Generation) of the rulesets now in the kernel.
	OnApplied func(gen uint64)
	// OnProgrammed, if set, is called after OnApplied with the same
	// generation and a view of the IPv4 chains now in the kernel (see
	// Dataplane.programmedChain), valid during the call only: felix's
	// endpoint report reads the chains of its endpoints and policies
	// there. The hashes it returns are shared and must not be modified.
	OnProgrammed func(gen uint64, chain func(table, name string) (hashes []string, programmed bool))
	// Heartbeat, if set, is called on every turn of Run's loop, at least
	// every 10s: a stuck sync (a hung iptables-restore) stops it.
	Heartbeat func()
	// NFTables, if set, selects the nftables dataplane (nftablesMode):
	// the rulesets and their sets are programmed through the connections
	// it opens as nftables (nft.go) instead of iptables and ipsets; V6
	// still says whether IPv6 is on.
	NFTables NftDialer
	// AfterFirstSync, if set, runs once after the first successful
	// Apply: the removal of the other mode's rules, so that traffic is
	// never without policy during a switch. A failure is logged.
	AfterFirstSync func(ctx context.Context) error
}

// Dataplane sequences the iptables and ipset drivers of one network
// namespace. SetDesired may be called from any goroutine; Apply and Run
// must not run concurrently with each other (Run calls Apply).
type Dataplane struct {
	cfg Config
	// v4 and v6 hold one driver per table, in apply order (raw, mangle,
	// filter: see rules.Ruleset.Tables); v6 is nil without IPv6.
	v4, v6 []*Table
	sets   *IPSets
	// nft is the nftables driver (Config.NFTables); with it, v4, v6 and
	// sets stay empty.
	nft       *nftDriver
	firstDone bool
	log       *slog.Logger

	mu      sync.Mutex
	pending []*rules.Ruleset // nil: nothing new
	// setUpdates are the ipset parts of every SetDesired since the last
	// Apply took them, in order, so that each one's member changes (which
	// lead from the one before) can be applied without a compare.
	setUpdates []setUpdate
	setGen     uint64 // SetDesired calls so far
	pendGen    uint64 // generation of pending
	kick       chan struct{}
	// takenGen is the generation of the rulesets the tables hold (used
	// by Apply only).
	takenGen uint64

	// inSync is true after a successful apply until the next failure.
	inSync atomic.Bool
	// lastErr is the last failed apply's error ("" after a success), for
	// Ready's reason.
	lastErr atomic.Pointer[string]
	// unprogrammed say which objects the last apply could not program
	// (for readiness); guarded by statusMu.
	statusMu     sync.Mutex
	unprogrammed []string
}

// InSync reports whether the last apply succeeded: everything desired
// is programmed (for readiness).
func (d *Dataplane) InSync() bool { return d.inSync.Load() }

// Ready is InSync with the reason when not: which objects could not be
// programmed (their rules fail closed meanwhile), or that no apply has
// succeeded yet.
func (d *Dataplane) Ready() (bool, string) {
	d.statusMu.Lock()
	bad := slices.Clone(d.unprogrammed)
	d.statusMu.Unlock()
	if len(bad) > 0 {
		return false, strings.Join(bad, "; ") + " (the rules depending on them drop their traffic until then; retrying)"
	}
	if !d.inSync.Load() {
		if e := d.lastErr.Load(); e != nil && *e != "" {
			return false, "sync failing (retrying): " + *e
		}
		return false, "not in sync yet"
	}
	return true, ""
}

// New returns a Dataplane; nothing runs until Apply or Run.
func New(cfg Config) *Dataplane {
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	members, _ := cfg.Runner.(IPSetMembers)
	filler, _ := cfg.Runner.(IPSetFiller)
	if cfg.Metrics != nil {
		cfg.Runner = countingRunner{Runner: cfg.Runner, m: cfg.Metrics}
	}
	d := &Dataplane{cfg: cfg, log: cfg.Logger, sets: NewIPSets(cfg.Runner), kick: make(chan struct{}, 1)}
	d.sets.members, d.sets.filler = members, filler
	d.sets.failed = d.newFailures()
	if cfg.NFTables != nil {
		d.nft = newNftDriver(cfg.NFTables, cfg.Logger)
		return d
	}
	d.v4 = d.newTables(cfg.V4)
	if cfg.V6 != (Backend{}) {
		d.v6 = d.newTables(cfg.V6)
	}
	return d
}

// newFailures tracks failed objects, retried from MinBackoff up to six
// times MaxBackoff (a retry of a failed set reads every set again).
func (d *Dataplane) newFailures() *failures {
	return newFailures(d.cfg.MinBackoff, 6*d.cfg.MaxBackoff)
}

// tableNames are the tables felix programs, in apply order.
var tableNames = []string{"raw", "mangle", "filter"}

func (d *Dataplane) newTable(name string, b Backend) *Table {
	t := NewTable(name, b, d.cfg.Runner)
	t.appendHooks, t.failed = d.cfg.AppendHooks, d.newFailures()
	return t
}

func (d *Dataplane) newTables(b Backend) []*Table {
	ts := make([]*Table, len(tableNames))
	for i, name := range tableNames {
		ts[i] = d.newTable(name, b)
	}
	return ts
}

// addTables appends a driver for each table of rs beyond the standard
// ones (nat, for NAT outgoing) the first time it has content; once there
// it stays, so its chains are removed when the content goes.
func (d *Dataplane) addTables(tables []*Table, b Backend, rs *rules.Ruleset) []*Table {
	for _, nt := range rs.Tables() {
		if !slices.ContainsFunc(tables, func(t *Table) bool { return t.name == nt.Name }) {
			tables = append(tables, d.newTable(nt.Name, b))
		}
	}
	return tables
}

// setDesired hands each table of one IP version its part of rs.
func setDesired(tables []*Table, rs *rules.Ruleset) {
	byName := map[string]rules.NamedTable{}
	for _, t := range rs.Tables() {
		byName[t.Name] = t
	}
	for _, t := range tables {
		want := byName[t.name]
		t.SetDesired(want.Chains, want.Hooks)
	}
}

// applyTables applies each table of one IP version, summing the stats.
// A table whose stale chains could not be deleted, or some of whose
// chains could not be programmed, does not stop the others. Rules
// matching the failed ipsets fail closed.
func (d *Dataplane) applyTables(ctx context.Context, tables []*Table, ipVersion int, failedSets []string) (Stats, error) {
	var sum Stats
	for _, t := range tables {
		t.SetFailedSets(failedSets)
		st, err := t.Apply(ctx)
		sum.ChainsWritten += st.ChainsWritten
		sum.ChainsDeleted += st.ChainsDeleted
		sum.HooksFixed += st.HooksFixed
		sum.Restores += st.Restores
		switch {
		case err == nil, errors.Is(err, ErrUnprogrammed):
		case errors.Is(err, ErrStaleChainsKept):
			d.log.Warn("iptables: keeping stale chains", "ipVersion", ipVersion, "table", t.name, "error", err)
		default:
			return sum, err
		}
	}
	return sum, nil
}

// setUpdate is the ipset part of one SetDesired: every family's sets and
// the renderers' versions and changes of them.
type setUpdate struct {
	specs    []rules.IPSetSpec
	versions map[string]uint64
	changes  map[string]rules.IPSetChange
}

// maxSetUpdates bounds the queue of ipset updates not yet applied; past
// it the oldest are dropped and the sets they changed are compared.
const maxSetUpdates = 64

// SetDesired hands over the rendered rulesets (one per IP version) and
// wakes Run.
func (d *Dataplane) SetDesired(rulesets ...*rules.Ruleset) {
	var up setUpdate
	for _, rs := range rulesets {
		if rs.IPVersion == 6 && d.cfg.V6 == (Backend{}) {
			continue
		}
		up.specs = append(up.specs, rs.IPSets...)
		if len(rulesets) == 1 {
			up.versions, up.changes = rs.IPSetVersions, rs.IPSetChanges
			continue
		}
		if rs.IPSetVersions != nil && up.versions == nil {
			up.versions = map[string]uint64{}
		}
		maps.Copy(up.versions, rs.IPSetVersions)
		if rs.IPSetChanges != nil && up.changes == nil {
			up.changes = map[string]rules.IPSetChange{}
		}
		maps.Copy(up.changes, rs.IPSetChanges)
	}
	d.mu.Lock()
	d.pending = rulesets
	if len(d.setUpdates) >= maxSetUpdates {
		d.setUpdates = slices.Delete(d.setUpdates, 0, len(d.setUpdates)-maxSetUpdates+1)
	}
	d.setUpdates = append(d.setUpdates, up)
	d.setGen++
	d.pendGen = d.setGen
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// InvalidateCaches makes the next Apply read the kernel (a full resync).
func (d *Dataplane) InvalidateCaches() {
	if d.nft != nil {
		d.nft.Invalidate()
	}
	for _, t := range append(slices.Clone(d.v4), d.v6...) {
		t.InvalidateCache()
	}
	d.sets.InvalidateCache()
}

// Result summarises one Apply.
type Result struct {
	V4, V6                   Stats
	SetsWritten, SetsDeleted int
	// SetsPatched are the sets written that were updated from the
	// renderers' member changes alone (no compare of member lists).
	SetsPatched int
	// SetsInProcess says the sets written were written in-process
	// (Runner's IPSetMembers), not by an ipset restore.
	SetsInProcess bool
	// SetsFilled says the members of the sets created were written
	// in-process (Runner's IPSetFiller) after a restore created them.
	SetsFilled bool
	// SetsTook and TablesTook are how long the ipset updates and the
	// iptables tables took (for the log).
	SetsTook, TablesTook time.Duration
}

// Apply takes the latest desired state and reconciles the kernel: ipsets
// first (so new rules find their sets), then the iptables tables, then the
// removal of sets no rule uses any more. Objects that could not be
// programmed do not stop the rest: the error then wraps ErrUnprogrammed
// and names them, and the rules that depend on them fail closed.
func (d *Dataplane) Apply(ctx context.Context) (Result, error) {
	res, err := d.apply(ctx)
	if (err == nil || errors.Is(err, ErrUnprogrammed)) && !d.firstDone {
		d.firstDone = true
		if f := d.cfg.AfterFirstSync; f != nil {
			if cerr := f(ctx); cerr != nil {
				d.log.Error("removing the other dataplane mode's rules failed", "error", cerr)
			}
		}
	}
	return res, err
}

// applyNft is Apply in nftables mode: one transaction for everything.
func (d *Dataplane) applyNft(ctx context.Context) (Result, error) {
	var res Result
	start := time.Now()
	st, err := d.nft.Apply(ctx)
	res.V4, res.TablesTook = st, time.Since(start)
	if err != nil {
		return res, err
	}
	if d.cfg.OnApplied != nil {
		d.cfg.OnApplied(d.takenGen)
	}
	if d.cfg.OnProgrammed != nil {
		d.cfg.OnProgrammed(d.takenGen, d.nft.programmed)
	}
	return res, d.settleFailures()
}

func (d *Dataplane) apply(ctx context.Context) (Result, error) {
	var res Result
	d.takePending()
	if d.nft != nil {
		return d.applyNft(ctx)
	}
	setsStart := time.Now()
	sets, err := d.sets.applyUpdates(ctx)
	if err != nil && !errors.Is(err, ErrUnprogrammed) {
		return res, err
	}
	res.SetsTook = time.Since(setsStart)
	tablesStart := time.Now()
	res.SetsWritten, res.SetsPatched, res.SetsInProcess, res.SetsFilled = sets.written, sets.patched, sets.inProcess, sets.filled
	if sets.fillFailed != nil {
		d.log.Warn("ipsets: filling new sets in-process failed; written by ipset restore instead", "error", sets.fillFailed)
	}
	failedSets := d.sets.FailedSets()
	// IPv4 and IPv6 tables are independent: restore them at the same
	// time (the kernel serialises the commits themselves, the processes
	// and their parsing overlap).
	v6Err := make(chan error, 1)
	if d.v6 != nil {
		go func() {
			var err error
			res.V6, err = d.applyTables(ctx, d.v6, 6, failedSets)
			v6Err <- err
		}()
	} else {
		v6Err <- nil
	}
	res.V4, err = d.applyTables(ctx, d.v4, 4, failedSets)
	if err = errors.Join(err, <-v6Err); err != nil {
		return res, err
	}
	res.TablesTook = time.Since(tablesStart)
	if res.SetsDeleted, err = d.sets.ApplyDeletions(ctx); err != nil {
		if !errors.Is(err, ErrStaleSetsKept) {
			return res, err
		}
		d.log.Warn("ipsets: keeping stale sets", "error", err)
	}
	if d.cfg.OnApplied != nil {
		// Also with objects unprogrammed: what depends on them fails
		// closed, everything else of this generation is in place.
		d.cfg.OnApplied(d.takenGen)
	}
	if d.cfg.OnProgrammed != nil {
		d.cfg.OnProgrammed(d.takenGen, d.programmedChain)
	}
	return res, d.settleFailures()
}

// programmedChain is what the kernel holds of one IPv4 chain, as the
// table driver knows it after an apply: the chain's rule hashes, and
// whether they are exactly the rendered ones (false for a chain not
// there, not (yet) written, replaced by a drop-all chain after a failure,
// or failing closed on an ipset that could not be programmed). Only
// during Apply (the tables are not safe for concurrent use).
func (d *Dataplane) programmedChain(table, name string) (hashes []string, programmed bool) {
	for _, t := range d.v4 {
		if t.name == table {
			return t.programmed(name)
		}
	}
	return nil, false
}

// takePending hands the latest SetDesired to the drivers.
func (d *Dataplane) takePending() {
	d.mu.Lock()
	pending, setUpdates := d.pending, d.setUpdates
	d.pending, d.setUpdates = nil, nil
	if pending != nil {
		d.takenGen = d.pendGen
	}
	d.mu.Unlock()
	if pending == nil {
		return
	}
	if d.nft != nil {
		for _, rs := range pending {
			if rs.IPVersion == 4 || d.cfg.V6 != (Backend{}) {
				d.nft.SetDesired([]*rules.Ruleset{rs})
			}
		}
		return
	}
	for _, up := range setUpdates {
		d.sets.Update(up.specs, up.versions, up.changes)
	}
	for _, rs := range pending {
		switch rs.IPVersion {
		case 4:
			d.v4 = d.addTables(d.v4, d.cfg.V4, rs)
			setDesired(d.v4, rs)
		case 6:
			if d.v6 == nil {
				continue
			}
			d.v6 = d.addTables(d.v6, d.cfg.V6, rs)
			setDesired(d.v6, rs)
		}
	}
}

// settleFailures logs and counts the objects that failed in this apply,
// records which are unprogrammed now (for Ready), and returns an error
// naming them (nil when there are none).
func (d *Dataplane) settleFailures() error {
	type driver struct {
		kind string
		f    *failures
	}
	drivers := []driver{{"ipset", d.sets.failed}}
	for v, tables := range map[int][]*Table{4: d.v4, 6: d.v6} {
		for _, t := range tables {
			drivers = append(drivers, driver{fmt.Sprintf("IPv%d %s chain", v, t.name), t.failed})
		}
	}
	var bad []string
	counts := map[string]int{"ipset": 0, "chain": 0}
	for _, dr := range drivers {
		metricKind := "chain"
		if dr.kind == "ipset" {
			metricKind = "ipset"
		}
		for _, f := range dr.f.drain() {
			d.log.Error("dataplane object could not be programmed; the rules depending on it drop their traffic until it is",
				"kind", dr.kind, "name", f.name, "error", f.err, "retryIn", f.retryIn)
			if m := d.cfg.Metrics; m != nil {
				m.ObjectFailures.WithLabelValues(metricKind).Inc()
			}
		}
		counts[metricKind] += len(dr.f.objs)
		bad = append(bad, dr.f.describe(dr.kind)...)
	}
	slices.Sort(bad)
	if m := d.cfg.Metrics; m != nil {
		for kind, n := range counts {
			m.Unprogrammed.WithLabelValues(kind).Set(float64(n))
		}
	}
	d.statusMu.Lock()
	d.unprogrammed = bad
	d.statusMu.Unlock()
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnprogrammed, strings.Join(bad, "; "))
}

// nextObjectRetry is when the earliest failed object is due for a retry
// (zero without failed objects).
func (d *Dataplane) nextObjectRetry() time.Time {
	next := d.sets.failed.nextRetry()
	for _, t := range append(slices.Clone(d.v4), d.v6...) {
		if r := t.failed.nextRetry(); !r.IsZero() && (next.IsZero() || r.Before(next)) {
			next = r
		}
	}
	return next
}

// withoutTimes is r without its durations: what it did.
func (r Result) withoutTimes() Result {
	r.SetsTook, r.TablesTook = 0, 0
	return r
}

// Generation is the number of SetDesired calls so far: the generation of
// the rulesets last handed over (OnApplied reports the applied one).
func (d *Dataplane) Generation() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.setGen
}

// Run applies on every SetDesired, re-reads the kernel every
// RefreshInterval, and after a failure retries with exponential backoff
// from a full resync. Objects that could not be programmed (see Apply)
// are retried on their own backoff, without holding up other changes.
// It returns when ctx is done.
func (d *Dataplane) Run(ctx context.Context) error {
	var refresh <-chan time.Time
	if d.cfg.RefreshInterval > 0 {
		t := time.NewTicker(d.cfg.RefreshInterval)
		defer t.Stop()
		refresh = t.C
	}
	backoff := d.cfg.MinBackoff
	var retry, objRetry <-chan time.Time
	beat := time.NewTicker(10 * time.Second)
	defer beat.Stop()
	for {
		if d.cfg.Heartbeat != nil {
			d.cfg.Heartbeat()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-beat.C:
			continue
		case <-d.kick:
		case <-objRetry:
		case <-refresh:
			d.InvalidateCaches()
		case <-retry:
			retry = nil
		}
		if retry != nil {
			// A retry is already scheduled; it will pick up this change.
			continue
		}
		start := time.Now()
		d.cfg.Health.Begin()
		res, err := d.Apply(ctx)
		d.cfg.Health.End()
		if err != nil && ctx.Err() != nil {
			// Stopping: whatever failed (typically a command killed
			// because ctx ended, "signal: killed") is no sync failure.
			d.log.Debug("dataplane sync interrupted by shutdown", "error", err)
			return ctx.Err()
		}
		d.inSync.Store(err == nil)
		d.noteErr(err)
		d.record(res, err, time.Since(start))
		objRetry = nil
		if next := d.nextObjectRetry(); !next.IsZero() {
			objRetry = time.After(max(time.Until(next), time.Millisecond))
		}
		if err != nil && !errors.Is(err, ErrUnprogrammed) {
			d.InvalidateCaches()
			d.log.Error("dataplane sync failed; retrying from a full resync", "error", err, "retryIn", backoff)
			retry = time.After(backoff)
			backoff = min(backoff*2, d.cfg.MaxBackoff)
			continue
		}
		backoff = d.cfg.MinBackoff
		d.logSynced(res, time.Since(start))
	}
}

// noteErr keeps an apply's error for Ready (objects the kernel refused are
// named by unprogrammed instead).
func (d *Dataplane) noteErr(err error) {
	msg := ""
	if err != nil && !errors.Is(err, ErrUnprogrammed) {
		msg = err.Error()
	}
	d.lastErr.Store(&msg)
}

// logSynced logs an apply that changed something.
func (d *Dataplane) logSynced(res Result, took time.Duration) {
	if did := res.withoutTimes(); did == (Result{}) {
		return
	}
	d.log.Info("dataplane synced", "duration", took,
		"setsDuration", res.SetsTook, "tablesDuration", res.TablesTook,
		"chainsWritten", res.V4.ChainsWritten+res.V6.ChainsWritten,
		"chainsDeleted", res.V4.ChainsDeleted+res.V6.ChainsDeleted,
		"hooksFixed", res.V4.HooksFixed+res.V6.HooksFixed,
		"setsWritten", res.SetsWritten, "setsDeleted", res.SetsDeleted)
}

// String describes a Result.
func (r Result) String() string {
	return fmt.Sprintf("v4=%+v v6=%+v setsWritten=%d setsDeleted=%d", r.V4, r.V6, r.SetsWritten, r.SetsDeleted)
}

func (d *Dataplane) record(res Result, err error, took time.Duration) {
	m := d.cfg.Metrics
	if m == nil {
		return
	}
	m.ApplySeconds.Observe(took.Seconds())
	if m.initialResyncDone {
		m.ApplyTime.Observe(took.Seconds())
	}
	m.Restores.WithLabelValues("iptables").Add(float64(res.V4.Restores))
	m.Restores.WithLabelValues("ip6tables").Add(float64(res.V6.Restores))
	if res.SetsWritten > 0 && !res.SetsInProcess {
		m.Restores.WithLabelValues("ipset").Inc()
	}
	if res.SetsDeleted > 0 {
		m.Restores.WithLabelValues("ipset").Inc()
	}
	if err != nil && !errors.Is(err, ErrUnprogrammed) {
		m.Failures.Inc()
		m.IntFailures.Inc()
		return
	}
	if !m.initialResyncDone {
		m.initialResyncDone = true
		m.InitialResync.Set(time.Since(m.initialResyncStart).Seconds())
	}
	rules := 0
	for v, tables := range map[string][]*Table{"4": d.v4, "6": d.v6} {
		for _, t := range tables {
			n := t.ruleCount()
			rules += n
			m.IptablesRules.WithLabelValues(v, t.name).Set(float64(n))
			m.IptablesChains.WithLabelValues(v, t.name).Set(float64(len(t.desired)))
		}
	}
	m.RulesProgrammed.Set(float64(rules))
	m.SetsProgrammed.Set(float64(len(d.sets.desired)))
	m.IPSetsTotal.Set(float64(len(d.sets.desired)))
	perFamily := map[string]int{"4": 0}
	if d.v6 != nil {
		perFamily["6"] = 0
	}
	for _, st := range d.sets.desired {
		v := "4"
		if st.family == "inet6" {
			v = "6"
		}
		perFamily[v]++
	}
	for v, n := range perFamily {
		m.IPSetsCalico.WithLabelValues(v).Set(float64(n))
	}
}
