package syncclient

import (
	"bufio"
	"fmt"
	"net"
	"time"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// session is one connection's reading loop.
type session struct {
	c   *Client
	nc  net.Conn
	w   *bufio.Writer
	r   *bufio.Reader // the connection's bytes, beneath every decoder
	enc *syncproto.Encoder
	dec *syncproto.Decoder
	// pending holds a resync's snapshot (the client was in sync before)
	// until the server says InSync; nil once the snapshot is applied or
	// when there is nothing to diff against.
	pending map[string]syncproto.SerializedUpdate
	// snapshot: the server has not yet sent its first InSync.
	snapshot bool
}

func newSession(c *Client, nc net.Conn) *session {
	s := &session{c: c, nc: nc, w: bufio.NewWriterSize(nc, 1<<10), snapshot: true}
	s.enc = syncproto.NewEncoder(s.w)
	s.r = bufio.NewReaderSize(nc, 32<<10)
	s.dec = syncproto.NewDecoder(s.r)
	if c.inSync {
		s.pending = map[string]syncproto.SerializedUpdate{}
	}
	return s
}

func (s *session) send(msg any) error {
	_ = s.nc.SetWriteDeadline(time.Now().Add(s.c.cfg.WriteTimeout))
	if err := s.enc.Send(msg); err != nil {
		return err
	}
	return s.w.Flush()
}

func (s *session) receive() (any, error) {
	_ = s.nc.SetReadDeadline(time.Now().Add(s.c.cfg.ReadTimeout))
	return s.dec.Receive()
}

func (s *session) handshake() error {
	cfg := s.c.cfg
	hello := syncproto.MsgClientHello{Hostname: cfg.Hostname, Info: cfg.Info, Version: cfg.Version, SyncerType: cfg.SyncerType}
	if !cfg.DisableCompression {
		hello.SupportsDecoderRestart = true
		hello.SupportedCompressionAlgorithms = []string{syncproto.CompressionSnappy}
	}
	err := s.send(hello)
	if err != nil {
		return err
	}
	msg, err := s.receive()
	if err != nil {
		return fmt.Errorf("reading Typha's hello: %w", err)
	}
	server, ok := msg.(syncproto.MsgServerHello)
	if !ok {
		return fmt.Errorf("unexpected first message from Typha: %T", msg)
	}
	if server.SyncerType != cfg.SyncerType {
		return fmt.Errorf("Typha serves syncer type %q, asked for %q", server.SyncerType, cfg.SyncerType)
	}
	return nil
}

// follow reads until the connection fails.
func (s *session) follow() error {
	for {
		msg, err := s.receive()
		if err != nil {
			return fmt.Errorf("reading from Typha: %w", err)
		}
		switch m := msg.(type) {
		case syncproto.MsgPing:
			if err := s.send(syncproto.MsgPong{PingTimestamp: m.Timestamp, PongTimestamp: time.Now()}); err != nil {
				return fmt.Errorf("answering Typha's ping: %w", err)
			}
		case syncproto.MsgKVs:
			s.kvs(m.KVs)
		case syncproto.MsgSyncStatus:
			s.syncStatus(m.SyncStatus)
		case syncproto.MsgDecoderRestart:
			if err := s.restartDecoder(m); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected message from Typha: %T", msg)
		}
	}
}

// restartDecoder reads what follows as a new stream, compressed as m
// says, and tells Typha it may send it.
func (s *session) restartDecoder(m syncproto.MsgDecoderRestart) error {
	if s.c.cfg.DisableCompression {
		return fmt.Errorf("Typha restarted the stream (%q) though this client did not offer it", m.Message)
	}
	dec, err := syncproto.NewCompressedDecoder(s.r, m.CompressionAlgorithm)
	if err != nil {
		return fmt.Errorf("Typha's decoder restart: %w", err)
	}
	s.dec = dec
	if err := s.send(syncproto.MsgACK{}); err != nil {
		return fmt.Errorf("acknowledging Typha's decoder restart: %w", err)
	}
	return nil
}

func (s *session) kvs(kvs []syncproto.SerializedUpdate) {
	if s.pending != nil {
		for _, su := range kvs {
			if su.Deleted() {
				delete(s.pending, su.Key)
			} else {
				s.pending[su.Key] = su
			}
		}
		return
	}
	ups := make([]datastore.Update, 0, len(kvs))
	for _, su := range kvs {
		if u, ok := s.c.apply(su); ok {
			ups = append(ups, u)
		}
	}
	if len(ups) > 0 {
		s.c.cb.OnUpdates(ups)
	}
}

func (s *session) syncStatus(st syncproto.SyncStatus) {
	c := s.c
	if st == syncproto.StatusInSync && s.pending != nil {
		// The resync's snapshot is whole: deliver what changed.
		ups := c.diff(s.pending)
		s.pending = nil
		if len(ups) > 0 {
			c.cb.OnUpdates(ups)
		}
		c.cfg.Log.Info("resynced through Typha", "changes", len(ups))
	}
	if s.pending != nil {
		return // the new Typha is not in sync yet: keep what we have
	}
	s.snapshot = false
	c.status = st
	switch {
	case st == syncproto.StatusInSync && !c.inSync:
		c.inSync = true
		c.cb.OnStatusUpdated(datastore.StatusInSync)
	case st != syncproto.StatusInSync && c.inSync:
		// Typha lost its datastore; what we have stays.
		c.cfg.Log.Warn("Typha is not in sync with the datastore", "status", st)
	}
}
