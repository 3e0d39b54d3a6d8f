// Package leader makes one kube-controllers replica act at a time: client-go
// leader election on the coordination.k8s.io Lease
// kube-system/calico-kube-controllers (the name the manifests' RBAC
// grants). The leader runs the controllers; when it loses the Lease its
// controllers are stopped before anyone else can hold it for long, and a
// replica that stops (SIGTERM) gives the Lease up at once so another takes
// over without waiting for it to expire.
package leader

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Defaults of the Lease.
const (
	DefaultName      = "calico-kube-controllers"
	DefaultNamespace = "kube-system"
)

// Config says which Lease and how long a leader keeps it.
type Config struct {
	Name, Namespace string
	// Identity names this replica in the Lease [default: host name plus a
	// random suffix].
	Identity string
	// LeaseDuration, RenewDeadline, RetryPeriod as client-go's
	// [defaults 15s, 10s, 2s].
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Logger                                    *slog.Logger
}

// Run campaigns for the Lease until ctx ends. Each time this replica
// becomes leader, lead runs with a context that is cancelled when
// leadership is lost; Run waits for lead to return before campaigning
// again, so two leads of one replica never overlap.
func Run(ctx context.Context, kube kubernetes.Interface, cfg Config, lead func(context.Context)) error {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Identity == "" {
		host, _ := os.Hostname()
		cfg.Identity = host + "_" + uuid.NewString()
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline == 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod == 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	for ctx.Err() == nil {
		lock := &recordingLock{Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: cfg.Name, Namespace: cfg.Namespace},
			Client:     kube.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		}}
		done := make(chan struct{})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:          lock,
			Name:          cfg.Name,
			LeaseDuration: cfg.LeaseDuration,
			RenewDeadline: cfg.RenewDeadline,
			RetryPeriod:   cfg.RetryPeriod,
			// Not client-go's ReleaseOnCancel: it gives the Lease up
			// before lead has returned (and also when renewing failed).
			// release below does it after.
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					defer close(done)
					log.Info("leading: the controllers run here", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
					lead(lctx)
				},
				OnStoppedLeading: func() {
					log.Info("not leading", "lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity)
				},
				OnNewLeader: func(id string) {
					if id != cfg.Identity {
						log.Info("another replica leads", "leader", id)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("leader election on Lease %s/%s: %w", cfg.Namespace, cfg.Name, err)
		}
		le.Run(ctx) // returns when leadership is lost or ctx ends
		if !lock.acquired.Load() {
			continue
		}
		// client-go starts lead in a goroutine and does not wait for it:
		// this replica's controllers must have stopped before it gives
		// the Lease up or campaigns again.
		<-done
		if ctx.Err() != nil {
			if err := release(lock, cfg.Identity); err != nil {
				log.Warn("giving the Lease up (another replica takes over when it expires)", "err", err)
			} else {
				log.Info("gave the Lease up", "lease", cfg.Namespace+"/"+cfg.Name)
			}
		}
	}
	return nil
}

// release empties the Lease if this replica still holds it, so another
// takes over at once instead of after the lease duration.
func release(lock resourcelock.Interface, identity string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil {
		return err
	}
	if rec.HolderIdentity != identity {
		return nil
	}
	now := metav1.NewTime(time.Now())
	return lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions: rec.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
	})
}

// recordingLock notes, synchronously, that this replica wrote itself into
// the Lease: then OnStartedLeading has been or is about to be started.
type recordingLock struct {
	resourcelock.Interface
	acquired atomic.Bool
}

func (l *recordingLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.acquired.Store(true)
	}
	return err
}

func (l *recordingLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	if err == nil && r.HolderIdentity == l.Identity() {
		l.acquired.Store(true)
	}
	return err
}
