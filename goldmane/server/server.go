package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/goldmane/store"
)

// Server is the gRPC side of the aggregator over one store.
type Server struct {
	proto.UnimplementedFlowsServer
	proto.UnimplementedFlowCollectorServer

	Store *store.Store
	Log   *slog.Logger
	// Now is the clock (time.Now in production).
	Now     func() time.Time
	metrics *metrics
}

type metrics struct {
	received *prometheus.CounterVec
	clients  prometheus.Gauge
	dropped  *prometheus.GaugeVec
	keys     prometheus.Gauge
}

// New returns a Server over st, registering Calico's Goldmane collector
// metrics (goldmane_collector_received_flows, _num_clients) and the
// store's bounds on reg (nil: none).
func New(st *store.Store, log *slog.Logger, reg prometheus.Registerer) *Server {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "goldmane_collector_received_flows",
			Help: "Total number of flows received by Goldmane aggregator."}, []string{"source"}),
		clients: prometheus.NewGauge(prometheus.GaugeOpts{Name: "goldmane_collector_num_clients",
			Help: "Number of clients connected to the flow collector."}),
		dropped: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tabby_goldmane_dropped_flows",
			Help: "Flows not kept, by reason (keys, windows: the memory bounds; old: past the retention; repeats: resent after a reconnection)."}, []string{"reason"}),
		keys: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tabby_goldmane_flow_keys", Help: "Flow keys kept."}),
	}
	if reg != nil {
		reg.MustRegister(m.received, m.clients, m.dropped, m.keys)
	}
	return &Server{Store: st, Log: log, Now: time.Now, metrics: m}
}

// Register adds the services to g.
func (s *Server) Register(g *grpc.Server) {
	proto.RegisterFlowsServer(g, s)
	proto.RegisterFlowCollectorServer(g, s)
}

// Connect takes one node's flows, answering each with a receipt.
func (s *Server) Connect(stream proto.FlowCollector_ConnectServer) error {
	who := source(stream.Context())
	s.metrics.clients.Inc()
	defer s.metrics.clients.Dec()
	s.Log.Info("node connected", "source", who)
	received := s.metrics.received.WithLabelValues(who)
	n := 0
	defer func() { s.Log.Info("node disconnected", "source", who, "flows", n) }()
	for {
		upd, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		received.Inc()
		n++
		s.Store.Add(who, upd.GetFlow(), s.Now())
		if err := stream.Send(&proto.FlowReceipt{}); err != nil {
			return err
		}
	}
}

// source is a node's identity: its client certificate's common name, or
// its address without the port.
func source(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "unknown"
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
		if cn := ti.State.PeerCertificates[0].Subject.CommonName; cn != "" {
			return cn
		}
	}
	if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		return ap.Addr().String()
	}
	return p.Addr.String()
}

// List answers Flows.List.
func (s *Server) List(_ context.Context, req *proto.FlowListRequest) (*proto.FlowListResult, error) {
	return s.Store.List(req, s.Now()), nil
}

// FilterHints answers Flows.FilterHints.
func (s *Server) FilterHints(_ context.Context, req *proto.FilterHintsRequest) (*proto.FilterHintsResult, error) {
	return s.Store.FilterHints(req, s.Now()), nil
}

// Stream sends the kept flows from start_time_gte (0: none) and then
// each interval's changed flows matching the filter, until the client
// goes or falls too far behind.
func (s *Server) Stream(req *proto.FlowStreamRequest, stream proto.Flows_StreamServer) error {
	start := req.GetStartTimeGte()
	if start < 0 {
		start = s.Now().Unix() + start
	}
	sub, past := s.Store.Subscribe(req.GetFilter(), start)
	defer sub.Close()
	for _, r := range past {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case rs, ok := <-sub.C:
			if !ok {
				return fmt.Errorf("stream fell behind; reconnect")
			}
			for _, r := range rs {
				if err := stream.Send(r); err != nil {
					return err
				}
			}
		}
	}
}

// Rollovers closes an interval every store interval until ctx ends, and
// updates the bound metrics.
func (s *Server) Rollovers(ctx context.Context) {
	iv := s.Store.Interval()
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Store.Rollover(s.Now())
			d := s.Store.Dropped()
			s.metrics.dropped.WithLabelValues("keys").Set(float64(d.Keys))
			s.metrics.dropped.WithLabelValues("windows").Set(float64(d.Windows))
			s.metrics.dropped.WithLabelValues("old").Set(float64(d.Old))
			s.metrics.dropped.WithLabelValues("repeats").Set(float64(d.Repeats))
			keys, _ := s.Store.Size()
			s.metrics.keys.Set(float64(keys))
		}
	}
}

// TLSConfig is the server's TLS: its certificate and, with a CA file,
// client certificates required and verified against it.
func TLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the server certificate %s: %w", certFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA %s: %w", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the CA %s holds no PEM certificate", caFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Serve serves g on l until ctx ends.
func Serve(ctx context.Context, g *grpc.Server, l net.Listener) error {
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	if err := g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving gRPC: %w", err)
	}
	return nil
}
