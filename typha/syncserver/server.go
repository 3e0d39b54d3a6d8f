// Package syncserver is Typha's TCP server: it accepts clients (felix,
// confd; optionally over mutual TLS, the listener is the caller's), reads
// each one's MsgClientHello, sends the snapshot of the syncer type asked
// for and then follows that type's breadcrumb chain (snapcache), sending
// every crumb's updates and status changes. It pings each client and
// drops one that stops answering (PongTimeout), whose writes stall
// (WriteTimeout: per-client backpressure is the socket's; nothing queues
// in Typha) or that falls more than MaxFallBehind behind the chain, so a
// slow client costs a pointer into the chain, never a growing queue.
//
// One goroutine writes to each connection and one reads from it; both end
// with the connection. Serve owns them all.
package syncserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// Config configures a Server. Zero durations take Calico's defaults.
type Config struct {
	// MaxMessageSize is the most KVs in one MsgKVs (Calico: 100).
	MaxMessageSize   int
	PingInterval     time.Duration // 10s
	PongTimeout      time.Duration // 60s
	HandshakeTimeout time.Duration // 10s
	WriteTimeout     time.Duration // 120s
	MaxFallBehind    time.Duration // 300s
	// MaxConns is the initial connection limit (Calico's
	// MaxConnectionsUpperLimit, 10000); SetMaxConns changes it. Above it,
	// one connection is dropped every DropInterval (1s) so that its client
	// reconnects to another replica.
	MaxConns     int
	DropInterval time.Duration
	// ShutdownTimeout: when Serve's context ends, the connections are
	// dropped one at a time over this long (at most one per
	// ShutdownMaxDropInterval), so clients move to other replicas
	// gradually; zero drops them all at once.
	ShutdownTimeout         time.Duration
	ShutdownMaxDropInterval time.Duration // 1s
	// SnapshotValidity is how long a compressed snapshot is reused after
	// the chain moved past it (Calico's BinarySnapshotTimeout, 1s).
	SnapshotValidity time.Duration
	// WriteBufferSize is each connection's write buffer (16 KiB).
	WriteBufferSize int
	Version         string
	Log             *slog.Logger
	Registerer      prometheus.Registerer
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = 100
	}
	def(&c.PingInterval, 10*time.Second)
	def(&c.PongTimeout, 60*time.Second)
	def(&c.HandshakeTimeout, 10*time.Second)
	def(&c.WriteTimeout, 120*time.Second)
	def(&c.MaxFallBehind, 300*time.Second)
	def(&c.SnapshotValidity, time.Second)
	def(&c.DropInterval, time.Second)
	def(&c.ShutdownMaxDropInterval, time.Second)
	if c.MaxConns <= 0 {
		c.MaxConns = 10000
	}
	if c.WriteBufferSize <= 0 {
		c.WriteBufferSize = 16 << 10
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Server serves the caches' streams.
type Server struct {
	cfg     Config
	caches  map[syncproto.SyncerType]*snapcache.Cache
	snaps   map[syncproto.SyncerType]*binarySnapshots
	m       *metrics
	nextID  atomic.Uint64
	clients atomic.Int64

	maxConns atomic.Int64
	connsMu  sync.Mutex
	conns    map[uint64]context.CancelFunc // every open connection's
}

// New returns a server for caches.
func New(caches map[syncproto.SyncerType]*snapcache.Cache, cfg Config) *Server {
	cfg.defaults()
	s := &Server{cfg: cfg, caches: caches, m: newMetrics(cfg.Registerer), snaps: map[syncproto.SyncerType]*binarySnapshots{},
		conns: map[uint64]context.CancelFunc{}}
	s.maxConns.Store(int64(cfg.MaxConns))
	for st, cache := range caches {
		s.snaps[st] = newBinarySnapshots(string(st), cache, cfg, s.m)
	}
	return s
}

// Clients is the number of connections open.
func (s *Server) Clients() int { return int(s.clients.Load()) }

// Serve accepts connections on l until ctx ends, then closes l, drops
// the connections (gradually: Config.ShutdownTimeout) and returns once
// they are gone.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	connCtx, stopConns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConns()
	var wg sync.WaitGroup
	go func() { <-ctx.Done(); l.Close() }()
	wg.Add(1)
	go func() { defer wg.Done(); s.govern(connCtx) }()
	err := s.accept(ctx, connCtx, l, &wg)
	if ctx.Err() != nil {
		s.drain()
	}
	stopConns()
	wg.Wait()
	return err
}

func (s *Server) accept(ctx, connCtx context.Context, l net.Listener, wg *sync.WaitGroup) error {
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting Typha clients: %w", err)
		}
		s.m.accepted.Inc()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(connCtx, conn)
		}()
	}
}

// conn is one client's state.
type conn struct {
	s      *Server
	id     uint64
	c      net.Conn
	w      *bufio.Writer
	enc    *syncproto.Encoder
	dec    *syncproto.Decoder
	log    *slog.Logger
	lastRx atomic.Int64 // unix nanos of the last message read
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	s.clients.Add(1)
	s.m.active.Inc()
	defer func() { s.clients.Add(-1); s.m.active.Dec() }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-ctx.Done(); nc.Close() }()
	c := &conn{s: s, id: s.nextID.Add(1), c: nc, w: bufio.NewWriterSize(nc, s.cfg.WriteBufferSize)}
	s.track(c.id, cancel)
	defer s.untrack(c.id)
	c.enc = syncproto.NewEncoder(c.w)
	c.dec = syncproto.NewDecoder(bufio.NewReaderSize(nc, 4<<10))
	c.log = s.cfg.Log.With("connID", c.id, "remote", nc.RemoteAddr().String())
	err := c.run(ctx, cancel)
	if ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		c.log.Info("Typha client connection closed", "reason", err)
	}
}

func (c *conn) run(ctx context.Context, cancel context.CancelFunc) error {
	cache, hello, err := c.handshake()
	if err != nil {
		return err
	}
	c.log = c.log.With("client", hello.Hostname, "syncer", string(hello.SyncerType))
	c.log.Debug("Typha client connected", "info", hello.Info)
	st := c.s.m.streaming.WithLabelValues(string(hello.SyncerType))
	st.Inc()
	defer st.Dec()
	crumb, status, err := c.sendSnapshot(cache, hello)
	if err != nil {
		return err
	}
	readErr := make(chan error, 1)
	go func() { readErr <- c.read(); cancel() }()
	err = c.stream(ctx, crumb, status)
	select {
	case rerr := <-readErr:
		if err == nil || errors.Is(err, context.Canceled) {
			err = rerr
		}
	default:
	}
	return err
}

func (c *conn) handshake() (*snapcache.Cache, syncproto.MsgClientHello, error) {
	cfg := c.s.cfg
	_ = c.c.SetDeadline(cfg.Now().Add(cfg.HandshakeTimeout))
	msg, err := c.dec.Receive()
	if err != nil {
		return nil, syncproto.MsgClientHello{}, fmt.Errorf("reading the client's hello: %w", err)
	}
	hello, ok := msg.(syncproto.MsgClientHello)
	if !ok {
		return nil, hello, fmt.Errorf("unexpected first message %T", msg)
	}
	if hello.SyncerType == "" {
		hello.SyncerType = syncproto.SyncerTypeFelix // Calico: an old client is felix
	}
	cache := c.s.caches[hello.SyncerType]
	if cache == nil {
		return nil, hello, fmt.Errorf("client %s asked for syncer type %q, which this Typha does not serve", hello.Hostname, hello.SyncerType)
	}
	err = c.enc.Send(syncproto.MsgServerHello{Version: cfg.Version, SyncerType: hello.SyncerType, ServerConnID: c.id})
	if err == nil {
		err = c.w.Flush()
	}
	_ = c.c.SetDeadline(time.Time{})
	c.lastRx.Store(cfg.Now().UnixNano())
	return cache, hello, err
}

// read takes pongs until the connection fails.
func (c *conn) read() error {
	cfg := c.s.cfg
	for {
		_ = c.c.SetReadDeadline(cfg.Now().Add(cfg.PongTimeout))
		msg, err := c.dec.Receive()
		if err != nil {
			return fmt.Errorf("reading from the client: %w", err)
		}
		now := cfg.Now()
		c.lastRx.Store(now.UnixNano())
		switch m := msg.(type) {
		case syncproto.MsgPong:
			c.s.m.pingLatency.Observe(now.Sub(m.PingTimestamp).Seconds())
		default:
			return fmt.Errorf("unexpected message from the client: %T", msg)
		}
	}
}

// sendSnapshot sends the snapshot, compressed when the client can take
// it, and returns the crumb and status it ends at.
func (c *conn) sendSnapshot(cache *snapcache.Cache, hello syncproto.MsgClientHello) (*snapcache.Breadcrumb, syncproto.SyncStatus, error) {
	if compressible(hello) {
		return c.sendBinarySnapshot(hello.SyncerType)
	}
	snap := cache.Snapshot()
	if err := c.sendKVs(snap.KVs); err != nil {
		return nil, 0, err
	}
	if err := c.send(syncproto.MsgSyncStatus{SyncStatus: snap.Status}); err != nil {
		return nil, 0, err
	}
	return snap.Crumb, snap.Status, c.flush()
}

// compressible: the client takes a decoder restart to snappy.
func compressible(hello syncproto.MsgClientHello) bool {
	return hello.SupportsDecoderRestart && slices.Contains(hello.SupportedCompressionAlgorithms, syncproto.CompressionSnappy)
}

// sendBinarySnapshot switches the client to snappy, sends the shared
// compressed snapshot (which ends by restarting the client's decoder
// again), and starts a compressed stream for the deltas once the client
// has acknowledged each restart.
func (c *conn) sendBinarySnapshot(st syncproto.SyncerType) (*snapcache.Breadcrumb, syncproto.SyncStatus, error) {
	snap, err := c.s.snaps[st].get()
	if err != nil {
		return nil, 0, fmt.Errorf("encoding the snapshot: %w", err)
	}
	restart := syncproto.MsgDecoderRestart{Message: "enable compression: snappy; send binary snapshot", CompressionAlgorithm: syncproto.CompressionSnappy}
	if err := c.send(restart); err != nil {
		return nil, 0, err
	}
	if err := c.flush(); err != nil {
		return nil, 0, err
	}
	if err := c.awaitACK(); err != nil {
		return nil, 0, err
	}
	_ = c.c.SetWriteDeadline(c.s.cfg.Now().Add(c.s.cfg.WriteTimeout))
	if _, err := c.w.Write(snap.Bytes); err != nil {
		return nil, 0, fmt.Errorf("writing the snapshot: %w", err)
	}
	if err := c.flush(); err != nil {
		return nil, 0, err
	}
	if err := c.awaitACK(); err != nil {
		return nil, 0, err
	}
	c.enc, err = syncproto.NewCompressedEncoder(c.w, syncproto.CompressionSnappy)
	return snap.crumb, snap.status, err
}

// awaitACK reads the client's MsgACK.
func (c *conn) awaitACK() error {
	_ = c.c.SetReadDeadline(c.s.cfg.Now().Add(c.s.cfg.HandshakeTimeout + c.s.cfg.WriteTimeout))
	defer func() { _ = c.c.SetReadDeadline(time.Time{}) }()
	msg, err := c.dec.Receive()
	if err != nil {
		return fmt.Errorf("waiting for the client's ACK: %w", err)
	}
	if _, ok := msg.(syncproto.MsgACK); !ok {
		return fmt.Errorf("expected the client's ACK, got %T", msg)
	}
	c.lastRx.Store(c.s.cfg.Now().UnixNano())
	return nil
}

// stream follows the chain from crumb, with pings between.
func (c *conn) stream(ctx context.Context, crumb *snapcache.Breadcrumb, status syncproto.SyncStatus) error {
	cfg := c.s.cfg
	ping := time.NewTicker(cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ping.C:
			if err := c.send(syncproto.MsgPing{Timestamp: cfg.Now()}); err != nil {
				return err
			}
			if err := c.flush(); err != nil {
				return err
			}
		case <-crumb.Ready():
			var err error
			if crumb, status, err = c.follow(ctx, crumb, status); err != nil {
				return err
			}
		}
	}
}

// follow sends every crumb after crumb that is ready now, then flushes.
func (c *conn) follow(ctx context.Context, crumb *snapcache.Breadcrumb, status syncproto.SyncStatus) (*snapcache.Breadcrumb, syncproto.SyncStatus, error) {
	cfg := c.s.cfg
	for {
		next := crumb.Next(ctx.Done())
		if next == nil {
			return crumb, status, ctx.Err()
		}
		crumb = next
		if behind := cfg.Now().Sub(crumb.Time); behind > cfg.MaxFallBehind {
			return crumb, status, fmt.Errorf("client fell %s behind (MaxFallBehind %s)", behind.Round(time.Second), cfg.MaxFallBehind)
		}
		if err := c.sendKVs(crumb.Updates); err != nil {
			return crumb, status, err
		}
		if crumb.Status != status {
			status = crumb.Status
			if err := c.send(syncproto.MsgSyncStatus{SyncStatus: status}); err != nil {
				return crumb, status, err
			}
		}
		select {
		case <-crumb.Ready():
			continue
		default:
		}
		return crumb, status, c.flush()
	}
}

func (c *conn) sendKVs(kvs []syncproto.SerializedUpdate) error {
	max := c.s.cfg.MaxMessageSize
	for len(kvs) > 0 {
		n := min(len(kvs), max)
		if err := c.send(syncproto.MsgKVs{KVs: kvs[:n]}); err != nil {
			return err
		}
		c.s.m.kvsSent.Add(float64(n))
		kvs = kvs[n:]
	}
	return nil
}

func (c *conn) send(msg any) error {
	_ = c.c.SetWriteDeadline(c.s.cfg.Now().Add(c.s.cfg.WriteTimeout))
	return c.enc.Send(msg)
}

func (c *conn) flush() error {
	_ = c.c.SetWriteDeadline(c.s.cfg.Now().Add(c.s.cfg.WriteTimeout))
	err := c.enc.Flush()
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		return fmt.Errorf("writing to the client: %w", err)
	}
	return nil
}
