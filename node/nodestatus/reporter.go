package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/node/birdctl"
)

// errStale: the resource changed (or went) since it was read.
var errStale = errors.New("resource changed since read")

// Reporter keeps the CalicoNodeStatus resources of one node filled in.
type Reporter struct {
	Client datastore.Client
	Node   string
	// Socket is BIRD's control socket.
	Socket string
	Logger *slog.Logger
	// Tick is how often due reports are looked for (default 1s).
	Tick time.Duration

	mu     sync.Mutex
	inSync bool
	objs   map[string]*v3.CalicoNodeStatus // this node's, by name
	kick   chan struct{}
}

// tracked is the reporter's memory of one resource.
type tracked struct {
	spec v3.CalicoNodeStatusSpec
	last time.Time // last report (written or found unchanged)
}

// OnStatusUpdated implements datastore.SyncerCallbacks.
func (r *Reporter) OnStatusUpdated(s datastore.SyncStatus) {
	r.mu.Lock()
	r.inSync = s == datastore.StatusInSync
	r.mu.Unlock()
	r.poke()
}

// OnUpdates implements datastore.SyncerCallbacks.
func (r *Reporter) OnUpdates(ups []datastore.Update) {
	r.mu.Lock()
	for _, u := range ups {
		if u.Type == datastore.EventDeleted || u.Object == nil {
			delete(r.objs, u.Key.Name)
			continue
		}
		if s, ok := u.Object.(*v3.CalicoNodeStatus); ok && s.Spec.Node == r.Node {
			if bad := UnknownClasses(s.Spec.Classes); len(bad) > 0 {
				r.Logger.Warn("CalicoNodeStatus asks for classes Calico does not have; they are not reported", "name", s.Name, "classes", fmt.Sprint(bad))
			}
			r.objs[u.Key.Name] = s
		} else {
			delete(r.objs, u.Key.Name)
		}
	}
	r.mu.Unlock()
	r.poke()
}

func (r *Reporter) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run watches the CalicoNodeStatus resources and reports until ctx ends.
func (r *Reporter) Run(ctx context.Context) error {
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.Tick == 0 {
		r.Tick = time.Second
	}
	r.objs = map[string]*v3.CalicoNodeStatus{}
	r.kick = make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		datastore.NewWatchSyncer(r.Client, []string{v3.KindCalicoNodeStatus}, r, datastore.DefaultBackoff).Run(ctx)
	}()
	defer wg.Wait()
	seen := map[string]*tracked{}
	t := time.NewTicker(r.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-t.C:
		}
		r.mu.Lock()
		ready := r.inSync
		objs := make([]*v3.CalicoNodeStatus, 0, len(r.objs))
		for _, o := range r.objs {
			objs = append(objs, o)
		}
		r.mu.Unlock()
		if !ready {
			continue
		}
		names := map[string]bool{}
		var snap *Snapshot
		for _, o := range objs {
			names[o.Name] = true
			tr := seen[o.Name]
			if !due(tr, o.Spec, time.Now()) {
				continue
			}
			if snap == nil {
				s := r.snapshot(ctx)
				snap = &s
			}
			if err := r.report(ctx, o, *snap); err != nil {
				if ctx.Err() == nil && !errors.Is(err, errStale) {
					r.Logger.Warn("updating CalicoNodeStatus", "name", o.Name, "error", err)
				}
				continue
			}
			seen[o.Name] = &tracked{spec: *o.Spec.DeepCopy(), last: time.Now()}
		}
		for n := range seen {
			if !names[n] {
				delete(seen, n)
			}
		}
	}
}

// due says a resource needs a report: new, its spec changed, or its
// period (updatePeriodSeconds > 0) elapsed.
func due(tr *tracked, spec v3.CalicoNodeStatusSpec, now time.Time) bool {
	if tr == nil || !reflect.DeepEqual(tr.spec, spec) {
		return true
	}
	if spec.UpdatePeriodSeconds == nil || *spec.UpdatePeriodSeconds == 0 {
		return false
	}
	return now.Sub(tr.last) >= time.Duration(*spec.UpdatePeriodSeconds)*time.Second
}

// snapshot reads BIRD.
func (r *Reporter) snapshot(ctx context.Context) Snapshot {
	var s Snapshot
	status, err := birdctl.Command(ctx, r.Socket, "show status")
	if err != nil {
		return Snapshot{Err: err}
	}
	s.Status = birdctl.ParseStatus(status)
	protos, err := birdctl.Command(ctx, r.Socket, "show protocols")
	if err != nil {
		return Snapshot{Err: err}
	}
	s.Peers, s.Protocols = birdctl.Peers(protos), birdctl.ProtocolTypes(protos)
	routes, err := birdctl.Command(ctx, r.Socket, "show route")
	if err != nil {
		return Snapshot{Err: err}
	}
	s.Routes = birdctl.ParseRoutes(routes)
	return s
}

// report writes o's status when it differs from the stored one.
func (r *Reporter) report(ctx context.Context, o *v3.CalicoNodeStatus, s Snapshot) error {
	st := Build(o.Spec.Classes, s)
	old := o.Status
	old.LastUpdated = metav1.Time{}
	if reflect.DeepEqual(old, st) {
		return nil
	}
	n := o.DeepCopy()
	st.LastUpdated = metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	n.Status = st
	if _, err := r.Client.Update(ctx, n); err != nil {
		if errors.Is(err, datastore.ErrConflict) || errors.Is(err, datastore.ErrNotFound) {
			return errStale // the watch brings the new version; the next tick reports
		}
		return err
	}
	return nil
}
