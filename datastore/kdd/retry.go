package kdd

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// listRetryInterval is how often the syncer's informers try a failed
// list or watch again, as Calico's watchersyncer relists (its
// ListRetryInterval): within a second of the API server's return.
const listRetryInterval = time.Second

// retryingListWatch is src's list and watch for an informer, each tried
// again every interval while it fails with an error that will pass (the
// API server unreachable or starting: network errors, 403 before its
// RBAC is loaded, 429, 5xx), until it works or ctx ends.
//
// Without it a client-go reflector retries with its own exponential
// backoff, 0.8 s doubling to 30 s with up to 100% jitter, so after an
// outage of 30 s the syncer could stay blind for up to a minute after the
// API server came back: felix then knew nothing of the pods started
// meanwhile (found by the chaos run, lab/cluster). Errors that need the
// reflector (410 Gone: relist from scratch) are returned at once.
func retryingListWatch(src *source, interval time.Duration) cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return retrying(ctx, src.name, "list", interval, func() (runtime.Object, error) { return src.list(ctx, "", o) })
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return retrying(ctx, src.name, "watch", interval, func() (watch.Interface, error) { return src.watch(ctx, "", o) })
		},
	}
}

// retrying calls f until it succeeds, fails for good (passing) or ctx
// ends, waiting interval between calls; the first failure of a streak is
// logged, and the recovery.
func retrying[T any](ctx context.Context, resource, op string, interval time.Duration, f func() (T, error)) (T, error) {
	failed := 0
	for {
		v, err := f()
		if err == nil || !passing(err) || ctx.Err() != nil {
			if err == nil && failed > 0 {
				slog.Info("syncer reaches the API server again", "resource", resource, "op", op, "failures", failed)
			}
			return v, err
		}
		if failed == 0 {
			slog.Warn("syncer cannot reach the API server; retrying every interval", "resource", resource, "op", op, "interval", interval, "err", err)
		}
		failed++
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(interval):
		}
	}
}

// passing: the error comes from the API server being away or starting
// (no status: a network error; 403 before its authorizer has loaded the
// RBAC objects, 429, 5xx), not from the request itself.
func passing(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	}
	code := st.Status().Code
	return code == http.StatusForbidden || code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
}
