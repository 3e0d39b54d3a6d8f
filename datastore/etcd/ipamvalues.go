package etcd

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
)

// The values of the IPAM kinds are libcalico-go's model structs as JSON,
// with no metadata. What the v3 objects carry beyond them:
//   - name: derived from the key (ipamkeys.go);
//   - uid: derived from the key and its etcd create revision, so it is
//     stable while the record lives and new when it is recreated;
//   - resourceVersion: the key's mod-revision, as for every kind;
//   - creationTimestamp: not stored; read back as the time of the read
//     (the record's age is unknown, and age-based grace periods, such as
//     the leak check's, must take it as young rather than old);
//   - labels, annotations, finalizers, owner references: not stored; a
//     write that carries any is refused rather than losing them.
// Fields of the model that v3 lacks (an allocation's releasedAt, for IP
// cooldown) make a record undecodable, never silently dropped.

// errMetadataNotStored refuses a write whose metadata the model cannot hold.
var errMetadataNotStored = errors.New("is not stored in Calico's etcd IPAM format")

// encodeIPAM renders an IPAM object as Calico's model JSON, refusing
// metadata the format cannot hold.
func encodeIPAM(r v3.Resource) ([]byte, error) {
	m := r.(interface {
		GetLabels() map[string]string
		GetAnnotations() map[string]string
		GetFinalizers() []string
		GetOwnerReferences() []metav1.OwnerReference
	})
	switch {
	case len(m.GetLabels()) > 0:
		return nil, fmt.Errorf("metadata.labels %w", errMetadataNotStored)
	case len(m.GetAnnotations()) > 0:
		return nil, fmt.Errorf("metadata.annotations %w", errMetadataNotStored)
	case len(m.GetFinalizers()) > 0:
		return nil, fmt.Errorf("metadata.finalizers %w", errMetadataNotStored)
	case len(m.GetOwnerReferences()) > 0:
		return nil, fmt.Errorf("metadata.ownerReferences %w", errMetadataNotStored)
	}
	return ipamformat.Encode(r)
}

// derivedUID is the uid of the record at key created at createRev.
func derivedUID(key string, createRev int64) types.UID {
	h := sha256.Sum256([]byte(key + "\x00" + strconv.FormatInt(createRev, 10)))
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}
