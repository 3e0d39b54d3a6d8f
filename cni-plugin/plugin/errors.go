package plugin

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// Plugin-specific CNI error codes (100 and up, as the spec reserves them),
// shared with calico-ipam (ipam/cniipam) and documented in the README.
const (
	// ErrCodeIPAMExhausted: no free address in the pools this pod may use.
	ErrCodeIPAMExhausted uint = 100
	// ErrCodeIPAMPool: an unknown, disabled or unusable pool was asked for.
	ErrCodeIPAMPool uint = 101
	// ErrCodeIPAMAddress: a requested address is outside every pool,
	// reserved, or already in use.
	ErrCodeIPAMAddress uint = 102
	// ErrCodeWiring: the pod's interface or routes could not be set up.
	ErrCodeWiring uint = 103
	// ErrCodeCheckFailed: CHECK found the pod's network differs from its
	// ADD result.
	ErrCodeCheckFailed uint = 104
	// ErrCodeDatastoreAccess: the datastore refused access (credentials,
	// certificates, permissions); the message names the cause.
	ErrCodeDatastoreAccess uint = 105
)

// toCNI maps an error onto a CNI error with the right code.
func toCNI(err error, msg string) *types.Error {
	if err == nil {
		return nil
	}
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	var ne *netconf.Error
	if errors.As(err, &ne) {
		return ne.CNI()
	}
	code := uint(types.ErrInternal)
	switch {
	case errors.Is(err, datastore.ErrAccessDenied):
		code = ErrCodeDatastoreAccess
	case errors.Is(err, datastore.ErrUnavailable):
		code = types.ErrTryAgainLater
	case errors.Is(err, ipam.ErrPoolExhausted):
		code = ErrCodeIPAMExhausted
	case errors.Is(err, ipam.ErrUnknownPool), errors.Is(err, ipam.ErrPoolDisabled), errors.Is(err, ipam.ErrNoPool):
		code = ErrCodeIPAMPool
	case errors.Is(err, ipam.ErrNotInPool), errors.Is(err, ipam.ErrReserved), errors.Is(err, ipam.ErrInUse):
		code = ErrCodeIPAMAddress
	}
	return types.NewError(code, msg, err.Error())
}
