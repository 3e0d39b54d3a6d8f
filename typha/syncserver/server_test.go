package syncserver_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/snapcache"
	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/syncserver"
)

// TestStuckClientDropped: a client that stops reading is disconnected
// (its writes time out) while updates keep coming: Typha queues nothing
// for it, and other clients are not held up.
func TestStuckClientDropped(t *testing.T) {
	cache := snapcache.New("felix", time.Now, nil, nil)
	cache.OnStatusUpdated(datastore.StatusInSync)
	srv, addr, _ := serve(t, cache, syncserver.Config{WriteTimeout: 300 * time.Millisecond, WriteBufferSize: 4 << 10})

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	w := bufio.NewWriter(conn)
	if err := syncproto.NewEncoder(w).Send(syncproto.MsgClientHello{Hostname: "stuck", SyncerType: syncproto.SyncerTypeFelix}); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Clients() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("client never connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Never read; send ~16 MiB of updates.
	big := strings.Repeat("x", 64<<10)
	for i := 0; srv.Clients() == 1; i++ {
		if time.Now().After(deadline) {
			t.Fatal("a client that does not read was never dropped")
		}
		p := &v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: string(rune('a' + i%26)), Annotations: map[string]string{"pad": big}}}
		cache.OnUpdates([]datastore.Update{{Type: datastore.EventModified, Key: datastore.KeyOf(p), Object: p}})
		time.Sleep(5 * time.Millisecond)
	}
}

// serve runs a server of cache's felix stream on a loopback port until
// the test ends or cancel is called, and returns it and its address.
func serve(t *testing.T, cache *snapcache.Cache, cfg syncserver.Config) (srv *syncserver.Server, addr string, cancel context.CancelFunc) {
	t.Helper()
	srv = syncserver.New(map[syncproto.SyncerType]*snapcache.Cache{syncproto.SyncerTypeFelix: cache}, cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv, l.Addr().String(), cancel
}
