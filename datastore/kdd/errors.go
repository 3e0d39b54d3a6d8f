package kdd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// storeErr maps an error from the API server (or from reaching it) onto
// the datastore's sentinels; other errors pass through.
func (c *Client) storeErr(err error) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch {
		// NotFound and Conflict carry nothing the OpError's key does not
		// already say: return the bare sentinels, so both backends read the
		// same to users.
		case apierrors.IsNotFound(err):
			return datastore.ErrNotFound
		case apierrors.IsAlreadyExists(err):
			return datastore.ErrAlreadyExists
		case apierrors.IsConflict(err):
			return datastore.ErrConflict
		case apierrors.IsGone(err), apierrors.IsResourceExpired(err), isTooOld(err):
			return fmt.Errorf("%w: %s", datastore.ErrRevisionGone, status.Status().Message)
		case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
			// The CRD's schema (or strict field validation) refused it.
			return &datastore.ValidationError{Errors: causes(status.Status())}
		case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
			apierrors.IsTooManyRequests(err):
			return c.unavailable(err)
		}
		return err
	}
	if isUnreachable(err) {
		return c.unavailable(err)
	}
	return err
}

func (c *Client) unavailable(err error) error {
	return &datastore.UnavailableError{Endpoints: []string{c.endpoint}, Err: err}
}

// isTooOld recognises the "too old resource version" expiry, which older
// servers send with codes other than 410.
func isTooOld(err error) bool {
	return strings.Contains(err.Error(), "too old resource version")
}

// isUnreachable: the request never got an answer (refused, reset,
// timed out, cancelled by the request deadline).
func isUnreachable(err error) bool {
	var ne net.Error
	var ue *url.Error
	var oe *net.OpError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &ne) || errors.As(err, &ue) || errors.As(err, &oe)
}

// causes turns the field causes of a 422 Invalid into field errors.
func causes(s metav1.Status) v3.ErrorList {
	var out v3.ErrorList
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			out = append(out, v3.FieldError{Path: v3.Path(c.Field), Msg: c.Message})
		}
	}
	if len(out) == 0 {
		out = append(out, v3.FieldError{Path: "", Msg: s.Message})
	}
	return out
}
