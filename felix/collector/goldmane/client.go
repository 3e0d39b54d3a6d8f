package goldmane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/goldmane/proto"
)

// Config is where and how to send.
type Config struct {
	// Server is FlowLogsGoldmaneServer (host:port).
	Server string
	// CertFile, KeyFile, CAFile: felix's client certificate and the CA
	// of the aggregator's (Calico's TyphaCertFile, TyphaKeyFile,
	// TyphaCAFile). All empty: no TLS.
	CertFile, KeyFile, CAFile string
	// Queue bounds the flows waiting to be sent (default 10,000).
	Queue int
	Log   *slog.Logger
	// Registerer takes the client's metrics (nil: none).
	Registerer prometheus.Registerer
}

// Client sends flows to the aggregator. Push is safe for concurrent use;
// Run is the one goroutine that sends.
type Client struct {
	conn    *grpc.ClientConn
	queue   chan *proto.Flow
	log     *slog.Logger
	sent    prometheus.Counter
	dropped prometheus.Counter
	up      prometheus.Gauge
}

// New prepares a client (no connection is made until Run).
func New(cfg Config) (*Client, error) {
	creds := insecure.NewCredentials()
	if cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
		t, err := clientTLS(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(t)
	}
	conn, err := grpc.NewClient(cfg.Server, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("flow server %q: %w", cfg.Server, err)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 10000
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &Client{conn: conn, queue: make(chan *proto.Flow, cfg.Queue), log: cfg.Log,
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_goldmane_flows_sent_total",
			Help: "Flows the Goldmane aggregator acknowledged."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "tabby_felix_goldmane_flows_dropped_total",
			Help: "Flows dropped because the queue to the Goldmane aggregator was full."}),
		up: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_felix_goldmane_connected",
			Help: "1 while felix's last flow sent to the Goldmane aggregator was acknowledged, 0 after its stream failed."}),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(c.sent, c.dropped, c.up)
	}
	return c, nil
}

func clientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading felix's client certificate for the flow server (TyphaCertFile, TyphaKeyFile): %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the flow server's CA (TyphaCAFile): %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("TyphaCAFile %s holds no PEM certificate", caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Push queues one flush's flows without waiting; what does not fit is
// dropped and counted.
func (c *Client) Push(flows []collector.Flow) {
	for i := range flows {
		select {
		case c.queue <- ToProto(&flows[i]):
		default:
			c.dropped.Inc()
		}
	}
}

// Run sends queued flows until ctx ends, reconnecting with backoff (1 s
// doubling to 10 s). It returns when ctx ends.
func (c *Client) Run(ctx context.Context) {
	defer c.conn.Close()
	var unacked *proto.Flow
	wait := time.Second
	for ctx.Err() == nil {
		var err error
		unacked, err = c.session(ctx, unacked)
		c.up.Set(0)
		if ctx.Err() != nil {
			return
		}
		c.log.Warn("flow server stream ended; reconnecting", "error", err, "in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
		if err == nil {
			wait = time.Second
		}
	}
}

// session is one stream: it sends first (the flow left without its
// receipt), then the queue, one receipt per flow. It returns the flow
// still without receipt when the stream fails.
func (c *Client) session(ctx context.Context, first *proto.Flow) (*proto.Flow, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := proto.NewFlowCollectorClient(c.conn).Connect(ctx)
	if err != nil {
		return first, err
	}
	send := func(f *proto.Flow) error {
		if err := stream.Send(&proto.FlowUpdate{Flow: f}); err != nil {
			return err
		}
		if _, err := stream.Recv(); err != nil {
			return err
		}
		c.up.Set(1)
		c.sent.Inc()
		return nil
	}
	if first != nil {
		if err := send(first); err != nil {
			return first, err
		}
	}
	c.log.Info("sending flows to the flow server", "target", c.conn.CanonicalTarget())
	for {
		select {
		case <-ctx.Done():
			return nil, nil
		case f := <-c.queue:
			if err := send(f); err != nil {
				return f, err
			}
		}
	}
}

// SentCounter and DroppedCounter are the client's counts (for tests and
// callers that report them).
func (c *Client) SentCounter() prometheus.Counter    { return c.sent }
func (c *Client) DroppedCounter() prometheus.Counter { return c.dropped }
