package commands

import (
	"errors"
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// calicoError is a datastore error in the words of Calico's libcalico-go
// errors (ErrorResourceDoesNotExist, ErrorResourceAlreadyExists,
// ErrorResourceUpdateConflict), which scripts and Calico's own system
// tests match on: "resource does not exist: IPPool(p) with error: <nil>".
// It wraps the datastore's error, so errors.Is still tells the cases apart.
type calicoError struct {
	msg string
	err error
}

func (e *calicoError) Error() string { return e.msg }
func (e *calicoError) Unwrap() error { return e.err }

// friendly is calicoWords for the datastore a is connected to.
func (a *app) friendly(err error) error { return calicoWords(err, a.datastoreType) }

// friendly is calicoWords where the datastore type is not at hand (the
// IPAM and migration commands): the API server's error is left out.
func friendly(err error) error { return calicoWords(err, "") }

// calicoWords puts the errors users hit most in Calico's words (see
// calicoError; the key is Calico's model key, e.g. NetworkPolicy(ns/name))
// and adds what to do to the others. dsType is the datastore's type.
func calicoWords(err error, dsType string) error {
	var op *datastore.OpError
	if errors.As(err, &op) {
		switch {
		case errors.Is(err, datastore.ErrNotFound):
			return &calicoError{fmt.Sprintf("resource does not exist: %s with error: %s", op.Key, apiError(dsType, op.Key, "not found")), err}
		case errors.Is(err, datastore.ErrAlreadyExists):
			return &calicoError{fmt.Sprintf("resource already exists: %s with error: %s", op.Key, apiError(dsType, op.Key, "already exists")), err}
		case errors.Is(err, datastore.ErrConflict):
			return &calicoError{fmt.Sprintf("update conflict: %s", op.Key), err}
		}
	}
	switch {
	case errors.Is(err, datastore.ErrUnavailable):
		return fmt.Errorf("%w (check the datastore is running and the endpoints in your configuration)", err)
	case errors.Is(err, datastore.ErrUndecodable):
		return fmt.Errorf("%w (the stored record is damaged: fix it in the datastore, or remove it with calicoctl delete)", err)
	}
	return err
}

// apiError is the error Calico's datastore client wraps for key: on etcd
// none ("<nil>"), on Kubernetes the API server's, e.g.
// ippools.crd.projectcalico.org "p" not found.
func apiError(dsType string, key datastore.Key, what string) string {
	if dsType != dsconfig.TypeKubernetes {
		return "<nil>"
	}
	resource := ""
	switch key.Kind {
	case v3.KindNode:
		resource = "nodes"
	case v3.KindWorkloadEndpoint:
		resource = "pods"
	default:
		info, ok := v3.LookupKind(key.Kind)
		if !ok {
			return "<nil>"
		}
		resource = info.Plural + ".crd.projectcalico.org"
	}
	return fmt.Sprintf("%s %q %s", resource, key.Name, what)
}

// withPlace prefixes err with where it happened (a file's document),
// unless err is in Calico's words, which name the resource already.
func withPlace(where string, err error) error {
	var ce *calicoError
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%s: %w", where, err)
}

// checkUserWrite is v3.CheckUserWrite in Calico's words: calicoctl's
// refusal of a read-only kind (ErrorOperationNotSupported, "operation
// delete is not supported on ClusterInformation", with Calico's reason
// where it gives one: apply says "resource is readonly").
func checkUserWrite(kind, op string) error {
	err := v3.CheckUserWrite(kind, op)
	if err == nil {
		return nil
	}
	msg := err.Error()
	if op == "apply" {
		msg += ": resource is readonly"
	}
	return &calicoError{msg, err}
}

// hitError is how Calico's patch reports a failure of its one resource.
func hitError(err error) error {
	var ce *calicoError
	if errors.As(err, &ce) {
		return fmt.Errorf("hit error: %w", err)
	}
	return err
}
