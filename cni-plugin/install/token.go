package install

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Defaults of TokenRefresher.
const (
	DefaultServiceAccount  = "calico-cni-plugin"
	DefaultTokenValidity   = 24 * time.Hour
	DefaultRefreshFraction = 0.25
	// MinTokenValidity is the shortest lifetime the API server issues.
	MinTokenValidity = 10 * time.Minute
)

// RequestToken asks the TokenRequest API for a token of the ServiceAccount
// namespace/name valid for validity, returning it and when it expires.
// The caller needs create on serviceaccounts/token for that name
// (calico-node's ClusterRole grants it for calico-cni-plugin only).
func RequestToken(ctx context.Context, kube kubernetes.Interface, namespace, name string, validity time.Duration) (string, time.Time, error) {
	secs := int64(validity / time.Second)
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &secs}}
	got, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("requesting a token for service account %s/%s: %w", namespace, name, err)
	}
	if got.Status.Token == "" {
		return "", time.Time{}, fmt.Errorf("requesting a token for service account %s/%s: the API server returned none", namespace, name)
	}
	return got.Status.Token, got.Status.ExpirationTimestamp.Time, nil
}

// TokenRefresher keeps the CNI plugin's token fresh: it requests a token,
// hands it to Write (WriteKubeconfig, in practice), and requests the next
// one once RefreshFraction of the token's lifetime has passed, long before
// it expires. A failed request or write is retried with backoff while the
// file in place keeps the last good token: nothing is ever removed.
type TokenRefresher struct {
	Kube           kubernetes.Interface
	Namespace      string        // of the ServiceAccount; default kube-system
	ServiceAccount string        // default calico-cni-plugin
	Validity       time.Duration // requested lifetime; default 24h, at least 10 min
	// RefreshFraction of a token's lifetime passes before the next is
	// requested; default 0.25.
	RefreshFraction float64
	// Write stores a new token; it must replace the old one atomically.
	Write func(token string, expires time.Time) error
	// RetryMin and RetryMax bound the backoff after a failure (default
	// 1s and 1min).
	RetryMin, RetryMax time.Duration
	Log                *slog.Logger
}

func (r *TokenRefresher) defaults() {
	if r.Namespace == "" {
		r.Namespace = "kube-system"
	}
	if r.ServiceAccount == "" {
		r.ServiceAccount = DefaultServiceAccount
	}
	if r.Validity == 0 {
		r.Validity = DefaultTokenValidity
	}
	if r.RefreshFraction <= 0 || r.RefreshFraction >= 1 {
		r.RefreshFraction = DefaultRefreshFraction
	}
	if r.RetryMin == 0 {
		r.RetryMin = time.Second
	}
	if r.RetryMax == 0 {
		r.RetryMax = time.Minute
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
}

// Refresh requests one token and writes it, returning when it expires.
func (r *TokenRefresher) Refresh(ctx context.Context) (time.Time, error) {
	r.defaults()
	if r.Validity < MinTokenValidity {
		return time.Time{}, fmt.Errorf("token validity %s is shorter than the API server's minimum %s", r.Validity, MinTokenValidity)
	}
	token, expires, err := RequestToken(ctx, r.Kube, r.Namespace, r.ServiceAccount, r.Validity)
	if err != nil {
		return time.Time{}, err
	}
	if err := r.Write(token, expires); err != nil {
		return time.Time{}, fmt.Errorf("storing the token of %s/%s: %w", r.Namespace, r.ServiceAccount, err)
	}
	return expires, nil
}

// Run refreshes the token until ctx is done (then it returns ctx.Err()).
func (r *TokenRefresher) Run(ctx context.Context) error {
	r.defaults()
	backoff := r.RetryMin
	for {
		issued := time.Now()
		expires, err := r.Refresh(ctx)
		var wait time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.Log.Error("refreshing the CNI plugin's token failed; the current one stays in place", "serviceAccount", r.Namespace+"/"+r.ServiceAccount, "retryIn", backoff, "err", err)
			wait = backoff
			backoff = min(2*backoff, r.RetryMax)
		} else {
			backoff = r.RetryMin
			wait = time.Duration(float64(expires.Sub(issued)) * r.RefreshFraction)
			r.Log.Info("refreshed the CNI plugin's token", "serviceAccount", r.Namespace+"/"+r.ServiceAccount, "expires", expires, "nextRefreshIn", wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}
