package etcd

import (
	"context"
	"net"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/google/go-cmp/cmp"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/calico/", "/calico0"},
		{"a", "b"},
		{"a\xff", "b"},
		{"\xff\xff", "\x00"},
	} {
		if got := string(kvpb.PrefixEnd(c.in)); got != c.want {
			t.Errorf("kvpb.PrefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestTxnRequestEncoding checks the hand encoding against etcd's own
// generated messages: what it writes, etcd's code reads as meant.
func TestTxnRequestEncoding(t *testing.T) {
	req := kvpb.TxnRequest{
		Compare: []kvpb.Compare{kvpb.CreateRevisionIs("/k1", 0), kvpb.ModRevisionIs("/k2", 42)},
		Success: []kvpb.RequestOp{kvpb.PutOp("/k1", []byte("v1")), kvpb.DeleteOp("/k2"), kvpb.GetOp("/k3"), kvpb.DeleteReturningOp("/k4")},
		Failure: []kvpb.RequestOp{kvpb.PrefixOp("/p/"), {Range: &kvpb.RangeRequest{Key: []byte("/k2"), KeysOnly: true}}},
	}
	var got pb.TxnRequest
	if err := proto.Unmarshal(req.Marshal(), &got); err != nil {
		t.Fatal(err)
	}
	want := &pb.TxnRequest{
		Compare: []*pb.Compare{
			{Key: []byte("/k1"), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}},
			{Key: []byte("/k2"), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: 42}},
		},
		Success: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("/k1"), Value: []byte("v1")}}},
			{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("/k2")}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("/k3")}}},
			{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("/k4"), PrevKv: true}}},
		},
		Failure: []*pb.RequestOp{
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("/p/"), RangeEnd: []byte("/p0")}}},
			{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("/k2"), KeysOnly: true}}},
		},
	}
	if d := cmp.Diff(want, &got, protocmp.Transform()); d != "" {
		t.Errorf("decoded by etcd (-want +got):\n%s", d)
	}
}

func TestTxnResponseDecoding(t *testing.T) {
	in := &pb.TxnResponse{
		Header:    &pb.ResponseHeader{ClusterId: 9, MemberId: 8, Revision: 77, RaftTerm: 2},
		Succeeded: true,
		Responses: []*pb.ResponseOp{
			{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: &pb.ResponseHeader{Revision: 77}}}},
			{Response: &pb.ResponseOp_ResponseRange{ResponseRange: &pb.RangeResponse{
				Header: &pb.ResponseHeader{Revision: 77},
				Kvs: []*mvccpb.KeyValue{
					{Key: []byte("/a"), CreateRevision: 3, ModRevision: 5, Version: 2, Value: []byte("x")},
					{Key: []byte("/b"), CreateRevision: 6, ModRevision: 6, Version: 1, Value: []byte("y"), Lease: 4},
				},
				Count: 2,
			}}},
			{Response: &pb.ResponseOp_ResponseDeleteRange{ResponseDeleteRange: &pb.DeleteRangeResponse{
				Header: &pb.ResponseHeader{Revision: 77}, Deleted: 1,
				PrevKvs: []*mvccpb.KeyValue{{Key: []byte("/c"), CreateRevision: 7, ModRevision: 9, Version: 3, Value: []byte("z")}},
			}}},
		},
	}
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out kvpb.TxnResponse
	if err := out.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if out.Header.Revision != 77 || !out.Succeeded || len(out.Responses) != 3 || out.Responses[0].Range != nil {
		t.Fatalf("decoded %+v", out)
	}
	kvs := out.Responses[1].Range.Kvs
	want := []kvpb.KeyValue{
		{Key: []byte("/a"), Value: []byte("x"), CreateRevision: 3, ModRevision: 5},
		{Key: []byte("/b"), Value: []byte("y"), CreateRevision: 6, ModRevision: 6},
	}
	if d := cmp.Diff(want, kvs); d != "" {
		t.Errorf("kvs (-want +got):\n%s", d)
	}
	if del := out.Responses[2].Delete; del == nil || cmp.Diff([]kvpb.KeyValue{{Key: []byte("/c"), Value: []byte("z"), CreateRevision: 7, ModRevision: 9}}, del.PrevKvs) != "" {
		t.Errorf("delete response %+v", del)
	}
	var failed kvpb.TxnResponse // false and empty fields are not on the wire
	if err := failed.Unmarshal([]byte{}); err != nil || failed.Succeeded {
		t.Errorf("decoded %+v, %v", failed, err)
	}
	if err := out.Unmarshal([]byte{0x0a, 0x05, 0x01}); err == nil {
		t.Error("a truncated message decoded without error")
	}
}

func TestGatewayEndpoints(t *testing.T) {
	tr, err := newGateway(TransportConfig{Endpoints: []string{"http://127.0.0.1:2379/", "unix:///run/etcd.sock", "unix:rel.sock", "10.0.0.1:2379", "https://etcd.example:2379"}})
	if err != nil {
		t.Fatal(err)
	}
	g := tr.(*gateway)
	for i, want := range map[int]string{0: "http://127.0.0.1:2379", 3: "http://10.0.0.1:2379", 4: "https://etcd.example:2379"} {
		if got := g.endpoints[i].base; got != want {
			t.Errorf("endpoint %d: base = %q, want %q", i, got, want)
		}
	}
	for _, bad := range []string{"", "unix://", "ftp://x"} {
		if _, err := newGateway(TransportConfig{Endpoints: []string{bad}}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("newGateway(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestPredial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			defer c.Close()
		}
	}()
	addr := ln.Addr().String()
	Predial([]string{"http://" + addr, "http://127.0.0.2:1"})
	ctx := context.Background()
	c := takePredialed(ctx, "tcp", addr)
	if c == nil {
		t.Fatal("no predialed connection")
	}
	c.Close()
	<-accepted
	if again := takePredialed(ctx, "tcp", addr); again != nil {
		t.Error("a predialed connection was handed out twice")
	}
	// Nothing listens here: the predial fails and the client dials itself.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	Predial([]string{deadAddr})
	if c := takePredialed(ctx, "tcp", deadAddr); c != nil {
		t.Error("a failed predial handed out a connection")
	}
}
