package goldmane_test

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/felix/collector/goldmane"
	"github.com/tabbynet/tabby/goldmane/certs"
	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/goldmane/server"
	"github.com/tabbynet/tabby/goldmane/store"
)

func deniedFlow(src string, start time.Time) collector.Flow {
	return collector.Flow{
		FlowKey: collector.FlowKey{
			Source:   collector.Endpoint{Kind: "wep", Namespace: "dev", Name: src},
			Dest:     collector.Endpoint{Kind: "wep", Namespace: "shop", Name: "backend"},
			DestPort: 8080, Proto: "tcp", Reporter: "Dst", Action: "Deny",
		},
		StartTime: start, EndTime: start.Add(5 * time.Second),
		Enforced: []collector.PolicyHit{{Index: 0, Kind: "np", Tier: "default", Namespace: "shop", Name: "backend-deny", Action: "Deny", RuleIndex: 2}},
		Pending:  []collector.PolicyHit{{Index: 0, Kind: "eot", Tier: "default", Action: "Deny", RuleIndex: -1}},
		Packets:  3, Bytes: 180,
	}
}

// aggregator serves a store over gRPC with mutual TLS on a loopback port.
func aggregator(t *testing.T, p certs.Paths, addr string) (*store.Store, func()) {
	t.Helper()
	st := store.New(store.Config{})
	cfg, err := server.TLSConfig(p.ServerCert, p.ServerKey, p.CA)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(cfg)))
	server.New(st, slog.Default(), nil).Register(g)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	return st, g.Stop
}

func waitFlows(t *testing.T, st *store.Store, n int) []*proto.FlowResult {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := st.List(&proto.FlowListRequest{}, time.Now())
		if len(res.Flows) >= n || time.Now().After(deadline) {
			if len(res.Flows) < n {
				t.Fatalf("%d flows at the aggregator, want %d", len(res.Flows), n)
			}
			return res.Flows
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClientSendsOverTLS: felix's client reaches the aggregator with its
// certificate, the flow arrives as Goldmane's Flow (kinds, actions,
// reporter, policy trace), a restart of the aggregator is survived, and a
// client without a certificate is refused.
func TestClientSendsOverTLS(t *testing.T) {
	p, err := certs.Write(t.TempDir(), []string{"127.0.0.1", "localhost"}, "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	st, stop := aggregator(t, p, addr)
	reg := prometheus.NewRegistry()
	c, err := goldmane.New(goldmane.Config{Server: addr, CertFile: p.ClientCert, KeyFile: p.ClientKey, CAFile: p.CA,
		Registerer: reg, Log: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	now := time.Now()
	c.Push([]collector.Flow{deniedFlow("tester", now)})
	got := waitFlows(t, st, 1)[0].Flow
	k := got.Key
	if k.SourceName != "tester" || k.SourceType != proto.EndpointType_WorkloadEndpoint || k.Action != proto.Action_Deny ||
		k.Reporter != proto.Reporter_Dst || got.PacketsIn != 3 || got.BytesIn != 180 {
		t.Errorf("flow at the aggregator: %v", got)
	}
	if h := k.Policies.EnforcedPolicies; len(h) != 1 || h[0].Kind != proto.PolicyKind_CalicoNetworkPolicy || h[0].Name != "backend-deny" || h[0].RuleIndex != 2 {
		t.Errorf("enforced: %v", h)
	}
	if h := k.Policies.PendingPolicies; len(h) != 1 || h[0].Kind != proto.PolicyKind_EndOfTier || h[0].RuleIndex != -1 {
		t.Errorf("pending: %v", h)
	}

	// The aggregator restarts (empty): the client reconnects.
	stop()
	st, stop = aggregator(t, p, addr)
	defer stop()
	c.Push([]collector.Flow{deniedFlow("after-restart", now)})
	waitFlows(t, st, 1)
	if n := testutil.ToFloat64(c.SentCounter()); n < 2 {
		t.Errorf("sent %v, want 2", n)
	}

	// Without a client certificate the aggregator refuses.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	s, err := proto.NewFlowCollectorClient(cc).Connect(ctx)
	if err == nil {
		err = s.Send(&proto.FlowUpdate{Flow: goldmane.ToProto(&collector.Flow{})})
		if err == nil {
			_, err = s.Recv()
		}
	}
	if err == nil {
		t.Error("a client without a certificate was served")
	}
	cancel()
	<-done
}

// TestPushNeverBlocks: with no aggregator, a full queue drops and counts.
func TestPushNeverBlocks(t *testing.T) {
	c, err := goldmane.New(goldmane.Config{Server: "127.0.0.1:1", Queue: 10})
	if err != nil {
		t.Fatal(err)
	}
	flows := make([]collector.Flow, 25)
	start := time.Now()
	c.Push(flows)
	if d := time.Since(start); d > time.Second {
		t.Errorf("Push took %v", d)
	}
	if n := testutil.ToFloat64(c.DroppedCounter()); n != 15 {
		t.Errorf("dropped %v, want 15", n)
	}
}
