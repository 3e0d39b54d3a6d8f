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
		// The elector runs on its own context, ended only once lead has
		// returned: with ReleaseOnCancel the Lease is given up when that
		// context ends, and no other replica may start while this one's
		// controllers still run.
		ectx, ecancel := context.WithCancel(context.WithoutCancel(ctx))
		stopWatch := context.AfterFunc(ctx, func() {
			if lock.acquired.Load() {
				<-done
			}
			ecancel()
		})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            cfg.Name,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					defer close(done)
					lctx, stop := context.WithCancel(lctx)
					defer stop()
					defer context.AfterFunc(ctx, stop)()
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
			stopWatch()
			ecancel()
			return fmt.Errorf("leader election on Lease %s/%s: %w", cfg.Namespace, cfg.Name, err)
		}
		le.Run(ectx) // returns when leadership is lost or ectx ends
		if lock.acquired.Load() {
			// client-go starts lead in a goroutine and does not wait
			// for it: wait here, so this replica's controllers have
			// stopped before it campaigns again.
			<-done
		}
		if stopWatch() {
			ecancel()
		} else {
			<-ectx.Done() // the AfterFunc ran (ctx ended): let it finish
		}
	}
	return nil
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
