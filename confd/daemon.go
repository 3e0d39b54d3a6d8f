package confd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/datastore"
)

// Kinds are the resource kinds confd watches.
var Kinds = []string{
	v3.KindBGPConfiguration, v3.KindBGPPeer, v3.KindBGPFilter,
	v3.KindNode, v3.KindIPPool, v3.KindBlockAffinity,
}

// Applier makes a configuration text BIRD's running configuration
// (*bird.Driver in production).
type Applier interface {
	Apply(ctx context.Context, text string) error
}

// Config configures a Daemon.
type Config struct {
	NodeName string
	RouterID string // as render.Input.RouterID
	LogFile  string // BIRD's log file; "" = stderr
	// Secrets reads the Secrets that BGP passwords name (KubeSecrets in
	// Kubernetes mode, NoSecrets otherwise; nil acts as NoSecrets). They
	// are re-read on every render, so only the Secrets in use are read.
	Secrets SecretGetter
	// SecretResync is how often the config is re-rendered while some
	// password names a Secret, so that a rotated, created or fixed Secret
	// takes effect (Secrets are not datastore resources, no event says
	// they changed). Default 30s. An unchanged result is not re-applied.
	SecretResync time.Duration
	// Debounce is how long to wait for more updates before rendering
	// (default 20ms): a burst of changes gives one reload.
	Debounce time.Duration
	// RetryMax caps the backoff after a failed apply (default 10s).
	RetryMax time.Duration
	Logger   *slog.Logger
	// Heartbeat, when set, is called on every turn of Run's loop, at least
	// every HeartbeatInterval (default 5s): a supervisor tells a stuck loop
	// from an idle one by it.
	Heartbeat         func()
	HeartbeatInterval time.Duration
	// OnSync, when set, is called after each render-and-apply with its
	// result (nil: BIRD runs the configuration of the current data).
	OnSync func(error)
}

// Daemon keeps BIRD's configuration in step with the datastore: it is the
// syncer's callback (it caches the resources), and its Run loop renders and
// applies, debounced, once the syncer is in sync.
//
// Thread-safety: the syncer calls OnStatusUpdated/OnUpdates from its own
// goroutines; they only touch the cache under mu and poke the kick channel.
// Rendering and applying happen only in Run's goroutine.
type Daemon struct {
	cfg     Config
	applier Applier
	log     *slog.Logger
	kick    chan struct{}

	mu     sync.Mutex
	cache  map[datastore.Key]v3.Resource
	inSync bool
}

// NewDaemon returns a daemon that applies through applier.
func NewDaemon(cfg Config, applier Applier) *Daemon {
	if cfg.Debounce == 0 {
		cfg.Debounce = 20 * time.Millisecond
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = 10 * time.Second
	}
	if cfg.SecretResync == 0 {
		cfg.SecretResync = 30 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Daemon{
		cfg: cfg, applier: applier, log: log.With("component", "confd", "node", cfg.NodeName),
		kick: make(chan struct{}, 1), cache: map[datastore.Key]v3.Resource{},
	}
}

// OnStatusUpdated implements datastore.SyncerCallbacks.
func (d *Daemon) OnStatusUpdated(st datastore.SyncStatus) {
	d.mu.Lock()
	d.inSync = st == datastore.StatusInSync
	d.mu.Unlock()
	d.poke()
}

// OnUpdates implements datastore.SyncerCallbacks.
func (d *Daemon) OnUpdates(ups []datastore.Update) {
	d.mu.Lock()
	for _, u := range ups {
		if u.Type == datastore.EventDeleted {
			delete(d.cache, u.Key)
		} else {
			d.cache[u.Key] = u.Object
		}
	}
	d.mu.Unlock()
	d.poke()
}

func (d *Daemon) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// RunWithSyncer runs a WatchSyncer over client feeding this daemon, and the
// daemon's loop, until ctx ends.
func (d *Daemon) RunWithSyncer(ctx context.Context, client datastore.Client) {
	d.RunSyncer(ctx, datastore.NewWatchSyncer(client, Kinds, d, datastore.DefaultBackoff))
}

// RunSyncer runs syncer (which must call this daemon back, for Kinds) and
// the daemon's loop until ctx ends, and returns once both stopped.
func (d *Daemon) RunSyncer(ctx context.Context, syncer datastore.Syncer) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		syncer.Run(ctx)
	}()
	d.Run(ctx)
	wg.Wait()
}

// Run renders and applies after each burst of changes until ctx ends. A
// render error (bad input) is logged and the running config is kept until
// the input changes; an apply error is retried with backoff.
func (d *Daemon) Run(ctx context.Context) {
	var (
		timer   = time.NewTimer(time.Hour)
		retry   time.Duration
		lastErr string
	)
	timer.Stop()
	defer timer.Stop()
	beat := time.NewTicker(d.cfg.HeartbeatInterval)
	defer beat.Stop()
	for {
		if d.cfg.Heartbeat != nil {
			d.cfg.Heartbeat()
		}
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			continue
		case <-d.kick:
			timer.Reset(d.cfg.Debounce)
			continue
		case <-timer.C:
		}
		usesSecrets, synced, err := d.sync(ctx)
		if ctx.Err() != nil {
			return // stopping: an apply cut short is no failure
		}
		if d.cfg.OnSync != nil && synced {
			d.cfg.OnSync(err)
		}
		var renderErr *renderError
		switch {
		case err == nil:
			retry, lastErr = 0, ""
			if usesSecrets {
				timer.Reset(d.cfg.SecretResync)
			}
		case errors.As(err, &renderErr):
			// Bad input: retrying cannot help, the next change will (or,
			// for a missing Secret, the next resync).
			if err.Error() != lastErr {
				d.log.Error("cannot render BIRD config, keeping the running one", "err", err)
				lastErr = err.Error()
			}
			retry = 0
			if usesSecrets {
				timer.Reset(d.cfg.SecretResync)
			}
		default:
			retry = min(max(2*retry, 100*time.Millisecond), d.cfg.RetryMax)
			if err.Error() != lastErr {
				d.log.Error("applying BIRD config failed, keeping the running one", "err", err, "retry", retry)
				lastErr = err.Error()
			}
			timer.Reset(retry)
		}
	}
}

type renderError struct{ err error }

func (e *renderError) Error() string { return e.err.Error() }
func (e *renderError) Unwrap() error { return e.err }

// sync reads the Secrets the passwords name, renders the cached resources
// and applies the result; usesSecrets says some password names a Secret.
// Before the syncer is in sync it does nothing: a partial view would drop
// peers.
func (d *Daemon) sync(ctx context.Context) (usesSecrets, synced bool, err error) {
	in, refs, ok := d.snapshot()
	if !ok {
		return false, false, nil
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	secrets, reasons, err := resolveSecrets(sctx, d.cfg.Secrets, refs)
	cancel()
	if err != nil {
		return true, true, err
	}
	in.Secrets = secrets
	text, err := render.Render(in)
	if err != nil {
		if len(reasons) > 0 {
			err = fmt.Errorf("%w (%s)", err, strings.Join(reasons, "; "))
		}
		return len(refs) > 0, true, &renderError{err}
	}
	if err := d.applier.Apply(ctx, text); err != nil {
		return len(refs) > 0, true, err
	}
	d.log.Debug("BIRD config applied", "took", time.Since(start))
	return len(refs) > 0, true, nil
}

func (d *Daemon) snapshot() (render.Input, []render.SecretRef, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inSync {
		return render.Input{}, nil, false
	}
	rs := make([]v3.Resource, 0, len(d.cache))
	for _, r := range d.cache {
		rs = append(rs, r)
	}
	in, err := render.FromResources(d.cfg.NodeName, rs)
	if err != nil {
		return render.Input{}, nil, false
	}
	in.RouterID, in.LogFile = d.cfg.RouterID, d.cfg.LogFile
	return in, secretRefs(rs), true
}
