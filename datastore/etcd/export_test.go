package etcd

import (
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// StorageKey is the etcd key of k, for the external tests.
func StorageKey(k datastore.Key) (string, error) {
	info, ok := v3.LookupKind(k.Kind)
	if !ok {
		return "", fmt.Errorf("unknown kind %s", k.Kind)
	}
	return keyFor(info, k)
}
