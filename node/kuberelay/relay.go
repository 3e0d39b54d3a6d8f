package kuberelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/tabbynet/tabby/datastore/kdd"
)

// Config says what a Relay serves and where.
type Config struct {
	// REST is calico-node's own client configuration: its watches.
	REST *rest.Config
	// Node is this node's name: the pods, node and block affinities
	// cached are this node's.
	Node string
	// Socket is the unix socket served [dsconfig.DefaultKubeRelay].
	Socket string
	// Log receives the relay's log [slog.Default()].
	Log *slog.Logger
}

// Relay serves the node's CNI plugin; see the package comment.
type Relay struct {
	socket string
	log    *slog.Logger
	kinds  []*cachedKind
	blocks *affineBlocks
	// answered and missed count requests (Counts).
	answered, missed atomic.Int64
}

// New builds a relay; nothing is watched or served until Run.
func New(cfg Config) (*Relay, error) {
	if cfg.REST == nil || cfg.Node == "" || cfg.Socket == "" {
		return nil, errors.New("kube relay: a client configuration, the node's name and a socket are required")
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	dyn, err := dynamic.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("kube relay: %w", err)
	}
	r := &Relay{socket: cfg.Socket, log: log, kinds: cachedKinds(dyn, cfg.Node),
		blocks: &affineBlocks{dyn: dyn, watches: map[string]*blockWatch{}}}
	r.blocks.follow(r.kind(affinitiesGVR).inf)
	return r, nil
}

// Run watches, serves the socket until ctx ends, then removes it.
func (r *Relay) Run(ctx context.Context) error {
	r.blocks.run(ctx)
	for _, k := range r.kinds {
		go k.inf.Run(ctx.Done())
	}
	l, err := listen(r.socket)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	r.log.Info("serving the CNI plugin's Kubernetes API relay", "socket", r.socket)
	go r.report(ctx, reportInterval)
	err = srv.Serve(l)
	_ = os.Remove(r.socket)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Synced reports whether every cache has its first list (before, no
// request is answered).
func (r *Relay) Synced() bool {
	for _, k := range r.kinds {
		if !k.inf.HasSynced() {
			return false
		}
	}
	return true
}

// Counts returns how many requests were answered from the caches and how
// many were not.
func (r *Relay) Counts() (answered, missed int64) {
	return r.answered.Load(), r.missed.Load()
}

// reportInterval is how often, at most, the relay logs its counts.
const reportInterval = 10 * time.Second

// report logs the counts every interval when they changed, until ctx
// ends: whether the node's CNI plugin goes through the relay, and how
// much of it the caches answer.
func (r *Relay) report(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var last [2]int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a, f := r.Counts()
		if now := [2]int64{a, f}; now != last {
			last = now
			r.log.Info("CNI plugin requests through the kube relay since start", "answeredFromWatches", a, "notHeld", f)
		}
	}
}

// listen makes the socket, root-only: what it answers locally is not
// authorised per request.
func listen(socket string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return nil, fmt.Errorf("kube relay: %w", err)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("kube relay: removing the old socket: %w", err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("kube relay: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("kube relay: %w", err)
	}
	return l, nil
}

// ServeHTTP answers from a cache what one can answer; anything else is
// 421 Misdirected Request (kdd.RelayMissStatus), and the plugin asks the
// API server.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	t0 := time.Now()
	if r.answer(w, req) {
		r.answered.Add(1)
		return
	}
	r.missed.Add(1)
	r.log.Debug("not cached", "method", req.Method, "path", req.URL.Path, "query", req.URL.RawQuery, "took", time.Since(t0))
	writeStatus(w, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: kdd.RelayMissStatus,
		Reason: metav1.StatusReasonUnknown, Message: "the kube relay does not hold this: ask the API server"}})
}
