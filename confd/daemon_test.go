package confd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeApplier struct {
	mu      sync.Mutex
	texts   []string
	failN   int // fail this many applies first
	applied chan string
}

func (f *fakeApplier) Apply(_ context.Context, text string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failN > 0 {
		f.failN--
		return errors.New("birdc: socket gone")
	}
	f.texts = append(f.texts, text)
	f.applied <- text
	return nil
}

func upd(r v3.Resource) datastore.Update {
	return datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r}
}

func nodeRes(name, ip string) *v3.Node {
	return &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: ip}}}
}

func peerRes(name, ip string, as numorstring.ASNumber) *v3.BGPPeer {
	return &v3.BGPPeer{TypeMeta: metav1.TypeMeta{Kind: v3.KindBGPPeer, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.BGPPeerSpec{PeerIP: ip, ASNumber: as}}
}

func start(t *testing.T, failN int) (*Daemon, *fakeApplier) {
	t.Helper()
	fa := &fakeApplier{failN: failN, applied: make(chan string, 100)}
	d := NewDaemon(Config{NodeName: "node1", Debounce: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, fa)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d, fa
}

func wait(t *testing.T, fa *fakeApplier) string {
	t.Helper()
	select {
	case s := <-fa.applied:
		return s
	case <-time.After(3 * time.Second):
		t.Fatal("no apply within 3s")
		return ""
	}
}

func none(t *testing.T, fa *fakeApplier, d time.Duration) {
	t.Helper()
	select {
	case s := <-fa.applied:
		t.Fatalf("unexpected apply:\n%s", s)
	case <-time.After(d):
	}
}

func TestDaemonRendersOnlyWhenInSyncAndDebounces(t *testing.T) {
	d, fa := start(t, 0)
	d.OnUpdates([]datastore.Update{upd(nodeRes("node1", "10.0.0.1/24")), upd(nodeRes("node2", "10.0.0.2/24"))})
	none(t, fa, 100*time.Millisecond) // not in sync yet: a partial view would drop peers
	d.OnStatusUpdated(datastore.StatusInSync)
	if got := wait(t, fa); !strings.Contains(got, "protocol bgp Mesh_10_0_0_2") {
		t.Fatalf("first config lacks the mesh peer:\n%s", got)
	}
	// A burst of updates gives one apply.
	for i := range 20 {
		d.OnUpdates([]datastore.Update{upd(nodeRes("node3", "10.0.0.3/24")), upd(peerRes("tor", "10.0.0.254", numorstring.ASNumber(65000+i)))})
	}
	got := wait(t, fa)
	if !strings.Contains(got, "neighbor 10.0.0.254 as 65019;") || !strings.Contains(got, "Mesh_10_0_0_3") {
		t.Fatalf("config after burst:\n%s", got)
	}
	none(t, fa, 100*time.Millisecond)
}

func TestDaemonKeepsConfigOnBadInput(t *testing.T) {
	d, fa := start(t, 0)
	d.OnUpdates([]datastore.Update{upd(nodeRes("node1", "10.0.0.1/24"))})
	d.OnStatusUpdated(datastore.StatusInSync)
	wait(t, fa)
	d.OnUpdates([]datastore.Update{upd(peerRes("bad", "10.0.0.300", 65000))})
	none(t, fa, 100*time.Millisecond)
	d.OnUpdates([]datastore.Update{{Type: datastore.EventDeleted, Key: datastore.KeyOf(peerRes("bad", "", 0))}, upd(peerRes("good", "10.0.0.254", 65000))})
	if got := wait(t, fa); !strings.Contains(got, "neighbor 10.0.0.254 as 65000;") || strings.Contains(got, "10.0.0.300") {
		t.Fatalf("config after fixing the bad peer:\n%s", got)
	}
}

func TestDaemonRetriesFailedApply(t *testing.T) {
	d, fa := start(t, 2)
	d.OnUpdates([]datastore.Update{upd(nodeRes("node1", "10.0.0.1/24"))})
	d.OnStatusUpdated(datastore.StatusInSync)
	wait(t, fa) // after two failures, the retry succeeds without any new update
}
