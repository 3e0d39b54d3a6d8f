// Package syncclient is the Typha client felix and confd follow the
// datastore through: a datastore.Syncer whose updates come from a Typha
// (syncserver) instead of the datastore's own watches.
//
// It keeps what it delivered (each key's resource version, and the object
// unless Lean) across connections. When a connection fails it connects
// again (to another replica when discovery names several, with jittered
// backoff), collects the new snapshot until the server says InSync, and
// delivers only the difference from what it delivered before: a consumer
// (felix's calculation, confd's render) sees no deletion and re-addition of
// unchanged objects, and so rewrites nothing. Its status stays InSync
// across a reconnection.
//
// A record it cannot decode is dropped (delivered as Deleted if it was
// delivered before, as datastore.WatchSyncer does), logged once per key.
package syncclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// Config configures a Client.
type Config struct {
	SyncerType syncproto.SyncerType
	// Kinds, if set, are the kinds delivered; others are dropped.
	Kinds []string
	// Lean: keep only resource versions; deletions carry only the key.
	Lean     bool
	Hostname string
	Info     string
	Version  string
	// Addrs returns the Typha addresses (host:port) to try.
	Addrs func(ctx context.Context) ([]string, error)
	// TLS, if set, is used for every connection (see TLSConfig).
	TLS *tls.Config
	// ReadTimeout: a connection silent this long is dropped (Calico's
	// TyphaReadTimeout, 30s). WriteTimeout bounds a write (10s).
	ReadTimeout, WriteTimeout time.Duration
	// DialTimeout bounds a connection attempt (10s).
	DialTimeout time.Duration
	// Dial, if set, opens the TCP connections instead of a net.Dialer
	// (tests map discovered names to loopback addresses with it).
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	Backoff datastore.Backoff
	Log     *slog.Logger
	// DisableCompression: do not offer Calico's decoder restart and
	// snappy (the stream is then plain gob, as an older client's).
	DisableCompression bool
}

// Client is a datastore.Syncer over Typha.
type Client struct {
	cfg   Config
	cb    datastore.SyncerCallbacks
	kinds map[string]bool

	// Owned by Run's goroutine.
	delivered map[datastore.Key]entry
	inSync    bool // InSync delivered to cb
	status    syncproto.SyncStatus
	badKeys   map[string]bool
}

type entry struct {
	rv  string
	obj v3.Resource // nil when lean
}

// New returns a client delivering to cb.
func New(cfg Config, cb datastore.SyncerCallbacks) *Client {
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.Backoff.Initial == 0 {
		cfg.Backoff = datastore.Backoff{Initial: 100 * time.Millisecond, Max: 5 * time.Second}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &Client{cfg: cfg, cb: cb, delivered: map[datastore.Key]entry{}, badKeys: map[string]bool{}}
	if cfg.Kinds != nil {
		c.kinds = map[string]bool{}
		for _, k := range cfg.Kinds {
			c.kinds[k] = true
		}
	}
	return c
}

// Run implements datastore.Syncer.
func (c *Client) Run(ctx context.Context) {
	c.cb.OnStatusUpdated(datastore.StatusWaitForDatastore)
	var last string
	var delay time.Duration
	for ctx.Err() == nil {
		addr, err := c.pick(ctx, last)
		streamed := false
		if err == nil {
			last = addr
			streamed, err = c.session(ctx, addr)
			if streamed {
				delay = 0 // it worked for a while: reconnect at once
			}
		}
		if ctx.Err() != nil {
			return
		}
		if streamed {
			c.cfg.Log.Warn("lost the connection to Typha; reconnecting", "typha", last, "error", err)
		} else {
			c.cfg.Log.Warn("cannot reach Typha; retrying", "typha", last, "error", err)
		}
		if delay == 0 {
			delay = c.cfg.Backoff.Initial
			sleep(ctx, time.Duration(rand.Int64N(int64(delay)))) // spread a replica's clients
			delay = c.cfg.Backoff.Initial / 2
			continue
		}
		delay = min(delay*2, c.cfg.Backoff.Max)
		sleep(ctx, delay-delay/5+time.Duration(rand.Int64N(int64(delay)/5*2+1)))
	}
}

// pick returns a random address, another than last when there are two
// or more.
func (c *Client) pick(ctx context.Context, last string) (string, error) {
	addrs, err := c.cfg.Addrs(ctx)
	if err != nil {
		return "", fmt.Errorf("finding Typha: %w", err)
	}
	if len(addrs) > 1 {
		addrs = slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == last })
	}
	if len(addrs) == 0 {
		return "", errors.New("no Typha address known")
	}
	return addrs[rand.IntN(len(addrs))], nil
}

// session connects to addr and follows it until the connection fails.
// streamed reports whether the handshake completed.
func (c *Client) session(ctx context.Context, addr string) (streamed bool, _ error) {
	nc, err := c.dial(ctx, addr)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-ctx.Done(); nc.Close() }()
	s := newSession(c, nc)
	if err := s.handshake(); err != nil {
		return false, err
	}
	c.cfg.Log.Info("connected to Typha", "typha", addr, "syncer", string(c.cfg.SyncerType), "resync", c.inSync)
	return true, s.follow()
}

func (c *Client) dial(ctx context.Context, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	dial := (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	if c.cfg.Dial != nil {
		dial = c.cfg.Dial
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil || c.cfg.TLS == nil {
		return nc, err
	}
	tc := tls.Client(nc, c.cfg.TLS)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake with Typha %s: %w", addr, err)
	}
	return tc, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
