package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/goldmane/server"
	"github.com/tabbynet/tabby/goldmane/store"
	"github.com/tabbynet/tabby/goldmane/web"
	"github.com/tabbynet/tabby/internal/headless"
)

// benchStore holds n flow keys: 50 source namespaces, pods and ports
// varied, a fifth denied, a tenth with a pending deny.
func benchStore(n int) *store.Store {
	st := store.New(store.Config{})
	now := time.Now()
	for i := range n {
		action, pol := proto.Action_Allow, &proto.PolicyHit{Kind: proto.PolicyKind_NetworkPolicy, Tier: "default", Namespace: "shop", Name: "allow-frontend", Action: proto.Action_Allow}
		if i%5 == 0 {
			action, pol = proto.Action_Deny, &proto.PolicyHit{Kind: proto.PolicyKind_CalicoNetworkPolicy, Tier: "default", Namespace: "shop", Name: fmt.Sprintf("deny-%d", i%37), Action: proto.Action_Deny, RuleIndex: int64(i % 3)}
		}
		var pending *proto.PolicyHit
		if i%10 == 1 {
			pending = &proto.PolicyHit{Kind: proto.PolicyKind_StagedNetworkPolicy, Tier: "default", Namespace: "shop", Name: "lockdown", Action: proto.Action_Deny}
		}
		f := testFlow(fmt.Sprintf("client-%d", i), fmt.Sprintf("server-%d", i%97), action, pol, pending, now.Add(-time.Duration(i%200)*15*time.Second))
		f.Key.SourceNamespace = fmt.Sprintf("ns-%d", i%50)
		f.Key.DestPort = int64(1000 + i%300)
		st.Add("bench", f, now)
	}
	return st
}

// BenchmarkPageFirstLoad10k (make bench-goldmane): the page's first load
// with 10,000 flows in headless Chromium: navigation to every row and the
// summary painted (render-ms), the list call as the page sees it
// (fetch-ms) and its list through render (list-render-ms).
func BenchmarkPageFirstLoad10k(b *testing.B) {
	const n = 10000
	st := benchStore(n)
	srv := httptest.NewServer(web.Handler(st, time.Now))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	br, err := headless.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	var render, fetch, listRender float64
	b.ResetTimer()
	for range b.N {
		p, err := br.Open(srv.URL + "/")
		if err != nil {
			b.Fatal(err)
		}
		var got struct {
			FetchMs, RenderMs, SinceNavigationMs float64
			Rows                                 int
		}
		if err := p.WaitFor("window.tabbyLoaded", time.Minute, &got); err != nil {
			b.Fatal(err)
		}
		p.Close()
		if got.Rows != n {
			b.Fatalf("%d rows rendered, want %d", got.Rows, n)
		}
		render += got.SinceNavigationMs
		fetch += got.FetchMs
		listRender += got.RenderMs
	}
	b.StopTimer()
	b.ReportMetric(render/float64(b.N), "render-ms")
	b.ReportMetric(fetch/float64(b.N), "fetch-ms")
	b.ReportMetric(listRender/float64(b.N), "list-render-ms")
}

// BenchmarkListGRPC10k (make bench-goldmane): Flows.List of all 10,000
// flows over gRPC on loopback (Calico's API, what whisker-backend calls),
// and one page of 100 filtered to denied flows.
func BenchmarkListGRPC10k(b *testing.B) {
	st := benchStore(10000)
	g := grpc.NewServer()
	server.New(st, slog.Default(), nil).Register(g)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go g.Serve(l)
	defer g.Stop()
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	c := proto.NewFlowsClient(cc)
	for _, tc := range []struct {
		name string
		req  *proto.FlowListRequest
		want int
	}{
		{"all", &proto.FlowListRequest{}, 10000},
		{"denied-page-100", &proto.FlowListRequest{PageSize: 100, Filter: &proto.Filter{Actions: []proto.Action{proto.Action_Deny}}}, 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				res, err := c.List(context.Background(), tc.req)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Flows) != tc.want {
					b.Fatalf("%d flows, want %d", len(res.Flows), tc.want)
				}
			}
		})
	}
}

// BenchmarkStoreList10k: the store's List alone (no encoding).
func BenchmarkStoreList10k(b *testing.B) {
	st := benchStore(10000)
	for range b.N {
		if res := st.List(&proto.FlowListRequest{}, time.Now()); len(res.Flows) != 10000 {
			b.Fatalf("%d flows", len(res.Flows))
		}
	}
}
