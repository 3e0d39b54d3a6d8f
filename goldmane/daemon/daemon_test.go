package daemon_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tabbynet/tabby/goldmane/certs"
	"github.com/tabbynet/tabby/goldmane/daemon"
	"github.com/tabbynet/tabby/goldmane/proto"
	"github.com/tabbynet/tabby/goldmane/store"
)

func TestFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := daemon.FromEnv(env(map[string]string{"PORT": "7443", "AGGREGATION_WINDOW": "15s", "SERVER_CERT_PATH": "/c", "SERVER_KEY_PATH": "/k"}))
	if err != nil || c.Port != 7443 || c.PagePort != 8081 || c.HealthPort != 8080 || c.Store.Interval != 15*time.Second {
		t.Errorf("config %+v, %v", c, err)
	}
	for _, bad := range []map[string]string{{"PORT": "x"}, {"HEALTH_PORT": "70000"}, {"AGGREGATION_WINDOW": "10ms"}, {"SERVER_CERT_PATH": "/c"}} {
		if _, err := daemon.FromEnv(env(bad)); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestRun: the aggregator takes a node's flow over mutual TLS on its
// socket and answers List, FilterHints, Stream and the page's API with
// it; it stops with its context.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	p, err := certs.Write(filepath.Join(dir, "certs"), []string{"localhost"}, "node-1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "gm.sock")
	page, health := freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Config{Host: "127.0.0.1", Socket: sock, PagePort: page, HealthPort: health,
			CertFile: p.ServerCert, KeyFile: p.ServerKey, CAFile: p.CA, Store: store.Config{Interval: time.Second}})
	}()
	base := "http://127.0.0.1:"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if r, err := http.Get(base + strconv.Itoa(health) + "/readiness"); err == nil && r.StatusCode == 200 {
			r.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
	}
	cert, _ := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	pem, _ := os.ReadFile(p.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	stream, err := proto.NewFlowsClient(cc).Stream(ctx, &proto.FlowStreamRequest{Filter: &proto.Filter{Actions: []proto.Action{proto.Action_Deny}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := proto.NewFlowCollectorClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	f := &proto.Flow{Key: &proto.FlowKey{SourceName: "a", DestName: "b", Action: proto.Action_Deny, Reporter: proto.Reporter_Dst,
		Proto: "tcp", DestPort: 80}, StartTime: now, EndTime: now + 1, PacketsIn: 1}
	if err := s.Send(&proto.FlowUpdate{Flow: f}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	res, err := proto.NewFlowsClient(cc).List(ctx, &proto.FlowListRequest{})
	if err != nil || len(res.Flows) != 1 || res.Flows[0].Flow.Key.SourceName != "a" {
		t.Fatalf("List: %v %v", res, err)
	}
	hints, err := proto.NewFlowsClient(cc).FilterHints(ctx, &proto.FilterHintsRequest{Type: proto.FilterType_FilterTypeDestName})
	if err != nil || len(hints.Hints) != 1 || hints.Hints[0].Value != "b" {
		t.Errorf("FilterHints: %v %v", hints, err)
	}
	// The stream sends the flow at the end of its interval (1 s here).
	got, err := stream.Recv()
	if err != nil || got.Flow.Key.SourceName != "a" || got.Id != res.Flows[0].Id {
		t.Errorf("Stream: %v %v", got, err)
	}
	r, err := http.Get(base + strconv.Itoa(page) + "/api/flows")
	if err != nil {
		t.Fatal(err)
	}
	var flows []map[string]any
	json.NewDecoder(r.Body).Decode(&flows)
	r.Body.Close()
	if len(flows) != 1 || flows[0]["src"] != "a" || flows[0]["action"] != "Deny" {
		t.Errorf("page API: %v", flows)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run did not stop")
	}
}
