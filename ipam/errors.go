package ipam

import "errors"

// Sentinel errors callers branch on with errors.Is. Datastore failures keep
// wrapping the datastore sentinels (datastore.ErrUnavailable for a store
// that cannot be reached: the CNI plugin maps that to "try again later").
var (
	// ErrPoolExhausted: the chosen pools have no free address this node may
	// use. The wrapping message names the pools and the node.
	ErrPoolExhausted = errors.New("IP pool exhausted")
	// ErrUnknownPool: a requested pool (by name or CIDR) does not exist.
	ErrUnknownPool = errors.New("unknown IP pool")
	// ErrPoolDisabled: a requested pool exists but is disabled.
	ErrPoolDisabled = errors.New("IP pool is disabled")
	// ErrNoPool: no enabled pool of the wanted IP version selects the node.
	ErrNoPool = errors.New("no usable IP pool")
	// ErrNotInPool: an address is outside every configured pool.
	ErrNotInPool = errors.New("address is not in any IP pool")
	// ErrReserved: the address is excluded by an IPReservation.
	ErrReserved = errors.New("address is reserved")
	// ErrInUse: a specific address requested is already allocated.
	ErrInUse = errors.New("address already allocated")
	// ErrHandleNotFound: no allocation carries the handle.
	ErrHandleNotFound = errors.New("IPAM handle not found")
	// ErrTooManyRetries: compare-and-swap kept losing.
	ErrTooManyRetries = errors.New("too many conflicting concurrent updates")
	// ErrOverlappingBlocks: a specific address lies in several existing
	// blocks (of overlapping pools); which one owns it is ambiguous.
	ErrOverlappingBlocks = errors.New("address is in overlapping IPAM blocks")
	// ErrInvalidArgs: the request itself is malformed.
	ErrInvalidArgs = errors.New("invalid IPAM request")
)
