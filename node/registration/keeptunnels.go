package registration

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// KeepTunnels runs EnsureTunnelAddrs for the node once the IP pools are
// known and again whenever a pool or the node's own Node changes (a
// datastore watch), so tunnel addresses appear and are released as pools
// switch encapsulation and as felix publishes or withdraws its WireGuard
// key. A
// failure is logged and retried after retry. It returns when ctx ends.
func KeepTunnels(ctx context.Context, c datastore.Client, alloc *ipam.Allocator, node string, o TunnelOptions, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	w := &poolWatch{node: node, kick: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		datastore.NewWatchSyncer(c, []string{v3.KindIPPool, v3.KindNode}, w, datastore.DefaultBackoff).Run(ctx)
	}()
	defer wg.Wait()
	const retry = 5 * time.Second
	var retryC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-retryC:
		}
		retryC = nil
		if !w.synced() {
			continue
		}
		if err := EnsureTunnelAddrs(ctx, c, alloc, node, o); err != nil && ctx.Err() == nil {
			log.Error("tunnel addresses", "node", node, "error", err)
			retryC = time.After(retry)
		}
	}
}

// poolWatch turns syncer callbacks (pools, and node's own Node) into
// kicks.
type poolWatch struct {
	node   string
	mu     sync.Mutex
	inSync bool
	kick   chan struct{}
}

func (w *poolWatch) OnStatusUpdated(s datastore.SyncStatus) {
	w.mu.Lock()
	w.inSync = s == datastore.StatusInSync
	w.mu.Unlock()
	w.poke()
}

func (w *poolWatch) OnUpdates(ups []datastore.Update) {
	for _, u := range ups {
		if u.Key.Kind != v3.KindNode || u.Key.Name == w.node {
			w.poke()
			return
		}
	}
}

func (w *poolWatch) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *poolWatch) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inSync
}
