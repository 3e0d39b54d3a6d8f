package ipam

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Config tunes an Allocator. The zero value is usable.
type Config struct {
	// CacheTTL is how long pools, IPAMConfiguration, reservations and
	// node labels read from the datastore are reused. 0 reads them on
	// every call (right for a short-lived CNI process); a long-lived
	// caller may set a few seconds, at the price of a pool change taking
	// that long to apply. Blocks are always cached optimistically: every
	// write is a compare-and-swap, so a stale cached block only costs a
	// conflict and a re-read, never correctness.
	CacheTTL time.Duration
	// MaxRetries bounds compare-and-swap retries per write [default 20].
	MaxRetries int
	// Now is the clock [default time.Now].
	Now func() time.Time
	// Logger [default slog.Default()].
	Logger *slog.Logger
	// ClaimLock, when set, makes the allocations of one node take turns
	// at claiming a new block (the CNI plugin: a file lock on the node,
	// shared by its one-call processes). It returns once the caller holds
	// the lock, and says whether it had to wait for another holder: that
	// one may have just claimed a block for the node, so the node's
	// affinities are read again before claiming. Without it, processes
	// started together on a node each claim (the same block: one creates
	// it, the others follow its claim with extra requests) and then race
	// on that block's compare-and-swap. Only an optimisation: correctness
	// never depends on it, and an implementation that cannot lock returns
	// a no-op unlock.
	ClaimLock func(ctx context.Context, node string) (unlock func(), waited bool)
	// CachedReads lets an allocation's look at the pools, reservations,
	// the node's affinities, the IPAM settings, the node's labels and its
	// hinted blocks come from a cache a little behind the store
	// (datastore.ListOptions.Cached, datastore.CachedGetter; see
	// stateWant.consistent for why that is safe there). For the one-call CNI processes, whose lists on the
	// Kubernetes datastore otherwise wait ~90 ms after any write in the
	// cluster; everything else (GC, checks, long-lived allocators) reads
	// consistently.
	CachedReads bool
}

// Allocator assigns and releases addresses. It is safe for concurrent use
// by many goroutines, and many Allocators (in many processes, on many
// nodes) may share one datastore: all coordination is by compare-and-swap
// on the datastore objects, the in-memory caches are only hints.
type Allocator struct {
	c   datastore.Client
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	env    *env                           // cached cluster settings
	labels map[string]cachedLabels        // node -> labels
	blocks map[netip.Prefix]*v3.IPAMBlock // last seen state of blocks
	affine map[string][]netip.Prefix      // node -> affine block CIDRs
	empty  map[netip.Prefix]emptySeen     // blocks seen empty, for the release grace period

	// queues combine this process's concurrent writes of one block into
	// one compare-and-swap (blockwriter.go). Only an optimisation: other
	// processes still race, and the compare-and-swap decides.
	queues sync.Map // netip.Prefix -> *blockQueue
}

type cachedLabels struct {
	labels map[string]string
	at     time.Time
}

type emptySeen struct {
	rv    string
	since time.Time
}

// env is the cluster-wide state an allocation depends on.
type env struct {
	pools []Pool
	// badPools are IPPool records that cannot be decoded: skipped, and
	// named when no usable pool is left.
	badPools     []datastore.BadRecord
	strict       bool
	autoAllocate bool
	maxBlocks    int
	reserved     Reservations
	at           time.Time
}

// New returns an Allocator over c.
func New(c datastore.Client, cfg Config) *Allocator {
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Allocator{
		c: c, cfg: cfg, log: cfg.Logger,
		labels: map[string]cachedLabels{},
		blocks: map[netip.Prefix]*v3.IPAMBlock{},
		affine: map[string][]netip.Prefix{},
		empty:  map[netip.Prefix]emptySeen{},
	}
}

// envFresh returns the cached settings when fresh enough, else nil.
func (a *Allocator) envFresh(now time.Time) *env {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.env; e != nil && a.cfg.CacheTTL > 0 && now.Sub(e.at) < a.cfg.CacheTTL {
		return e
	}
	return nil
}

// labelsFresh returns the node's cached labels when fresh enough.
func (a *Allocator) labelsFresh(node string, now time.Time) (map[string]string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.labels[node]
	if ok && a.cfg.CacheTTL > 0 && now.Sub(c.at) < a.cfg.CacheTTL {
		return c.labels, true
	}
	return nil, false
}

// loadEnv returns the pools, IPAM settings and reservations, from the cache
// when fresh enough.
func (a *Allocator) loadEnv(ctx context.Context) (*env, error) {
	if e := a.envFresh(a.cfg.Now()); e != nil {
		return e, nil
	}
	st, err := a.readState(ctx, "", stateWant{env: true})
	return st.env, err
}

// prepare returns the settings and the node's labels, reading what is not
// cached (and the node's affinities, when not cached either) in one round
// trip.
func (a *Allocator) prepare(ctx context.Context, node string) (*env, map[string]string, error) {
	now := a.cfg.Now()
	e := a.envFresh(now)
	labels, haveLabels := a.labelsFresh(node, now)
	a.mu.Lock()
	_, haveAff := a.affine[node]
	a.mu.Unlock()
	if e != nil && haveLabels && haveAff {
		return e, labels, nil
	}
	st, err := a.readState(ctx, node, stateWant{env: e == nil, labels: !haveLabels, affinities: !haveAff})
	if err != nil {
		return nil, nil, err
	}
	if e == nil {
		e = st.env
	}
	if !haveLabels {
		labels = st.labels
	}
	return e, labels, nil
}

// backoff sleeps a short random time growing with the attempt, so writers
// that collided do not collide again in lockstep.
func backoff(ctx context.Context, attempt int) error {
	maxD := time.Millisecond << min(attempt, 6) // 1ms .. 64ms
	d := time.Duration(rand.Int64N(int64(maxD))) + 100*time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (a *Allocator) cachedBlock(cidr netip.Prefix) *v3.IPAMBlock {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b := a.blocks[cidr]; b != nil {
		return b.DeepCopy()
	}
	return nil
}

func (a *Allocator) storeBlock(cidr netip.Prefix, b *v3.IPAMBlock) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b == nil {
		delete(a.blocks, cidr)
		return
	}
	a.blocks[cidr] = b.DeepCopy()
}

// AffineBlocks returns the blocks last seen affine to node (nil when this
// allocator has not read them).
func (a *Allocator) AffineBlocks(node string) []netip.Prefix {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.affine[node])
}

func blockKey(cidr netip.Prefix) datastore.Key {
	return datastore.Key{Kind: v3.KindIPAMBlock, Name: BlockName(cidr)}
}

func (a *Allocator) getBlock(ctx context.Context, cidr netip.Prefix) (*v3.IPAMBlock, error) {
	r, err := a.c.Get(ctx, blockKey(cidr))
	if err != nil {
		if errors.Is(err, datastore.ErrNotFound) {
			a.storeBlock(cidr, nil)
		}
		return nil, err
	}
	b := r.(*v3.IPAMBlock)
	a.storeBlock(cidr, b)
	return b, nil
}

// errNoChange tells updateBlock the mutation decided not to write.
var errNoChange = errors.New("no change")

// errNothingToDo is errNoChange for a reason independent of the block's
// state (no re-read needed).
var errNothingToDo = fmt.Errorf("nothing to do: %w", errNoChange)

// rollbackCtx outlives the caller's context so undoing a half-done
// operation is not itself cut short by the cancellation that caused it.
func rollbackCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

// Warm reads what an allocation for node will need: the pools, settings
// and reservations, the node's labels and its block affinities (one round
// trip: a single read transaction on etcd), then the node's affine blocks
// (a second one). A fresh process (a CNI ADD) calls it alongside its other
// first reads, so that AutoAssign then only writes. Reads are kept for
// CacheTTL (affinities and blocks until they prove stale).
//
// hints are blocks the caller expects to be affine to node (AffineBlocks of
// an earlier process): they are read in the first transaction, and kept
// only if that same transaction shows them affine, so a right guess saves
// the second round trip and a wrong one costs nothing but its bytes.
func (a *Allocator) Warm(ctx context.Context, node string, hints ...netip.Prefix) error {
	st, err := a.readState(ctx, node, stateWant{env: true, labels: true, affinities: true, blocks: hints})
	if err != nil {
		return err
	}
	return a.prefetchBlocks(ctx, st.affinities, st.env.reserved)
}

// explain adds the undecodable pools to an error about choosing pools: the
// pool the caller wanted may be one of them.
func (e *env) explain(err error) error {
	if err == nil || len(e.badPools) == 0 {
		return err
	}
	var keys []string
	for _, b := range e.badPools {
		keys = append(keys, fmt.Sprintf("%s (%v)", b.StorageKey, b.Err))
	}
	return fmt.Errorf("%w; skipped %d IPPool record(s) that cannot be decoded (fix or delete them): %s", err, len(keys), strings.Join(keys, "; "))
}
