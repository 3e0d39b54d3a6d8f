package datastore

import (
	"errors"
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Sentinel errors callers branch on with errors.Is.
var (
	ErrNotFound      = errors.New("resource not found")
	ErrAlreadyExists = errors.New("resource already exists")
	// ErrConflict means a compare-and-swap lost: re-read and retry.
	ErrConflict = errors.New("resource changed since it was read")
	// ErrRevisionGone means a watch asked for history the store has
	// compacted away: relist.
	ErrRevisionGone = errors.New("revision compacted: relist")
	// ErrReadOnly is returned for writes to resources derived from native
	// Kubernetes objects (change the Kubernetes object instead).
	ErrReadOnly = errors.New("resource is read-only")
	// ErrUnavailable means the store could not be reached.
	ErrUnavailable = errors.New("datastore unavailable")
	// ErrInvalid wraps validation failures (the ErrorList is kept too).
	ErrInvalid = errors.New("invalid resource")
)

// OpError says which operation on which key failed, wrapping a sentinel.
type OpError struct {
	Op  string // "create", "update", "delete", "get", "list", "watch"
	Key Key
	Err error
}

func (e *OpError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Op, e.Key, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// ValidationError is returned when a write is rejected before reaching
// the store. It matches ErrInvalid and exposes the field errors.
type ValidationError struct {
	Errors v3.ErrorList
}

func (e *ValidationError) Error() string { return "invalid resource: " + e.Errors.Error() }

func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// UnavailableError says which endpoint could not be reached and why.
type UnavailableError struct {
	Endpoints []string
	Err       error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("datastore unavailable at %v: %v", e.Endpoints, e.Err)
}

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

// ErrAccessDenied means the store refused this client, or this client
// refused the store: wrong credentials, an untrusted, expired or
// mismatched certificate, or no permission on the keys. Retrying does not
// help: the configuration must change.
var ErrAccessDenied = errors.New("datastore access denied")

// AccessError says which endpoints refused access, why in words an
// operator can act on, and the underlying error.
type AccessError struct {
	Endpoints []string
	Reason    string
	Err       error
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("datastore at %v: %s: %v", e.Endpoints, e.Reason, e.Err)
}

func (e *AccessError) Is(target error) bool { return target == ErrAccessDenied }

func (e *AccessError) Unwrap() error { return e.Err }
