// Package syncproto is the protocol between Typha and its clients (felix,
// confd), after Calico's typha/pkg/syncproto: the client sends
// MsgClientHello naming its syncer type, the server answers MsgServerHello,
// then sends the snapshot as MsgKVs, a MsgSyncStatus (InSync), and from
// then on MsgKVs and MsgSyncStatus as the datastore changes. The server
// pings (MsgPing) and the client answers (MsgPong); a side that hears
// nothing for its read timeout closes the connection.
//
// Messages are gob-encoded Envelopes, registered under Calico's type names.
// The payload differs from Calico's: a SerializedUpdate's Key is
// "<Kind>/<namespace>/<name>" and its Value the projectcalico.org/v3 JSON of
// the object (Calico: libcalico-go model paths and v1 model JSON), so a
// Calico felix cannot read a Tabby Typha nor the reverse. Compression
// (Calico's snappy/zstd decoder restart) is not offered.
//
// Pure: no I/O beyond the io.Reader/Writer given.
package syncproto

import (
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// DefaultPort is Typha's port (Calico's).
const DefaultPort = 5473

// SyncerType names a stream of kinds (Calico's names).
type SyncerType string

// The syncer types Tabby's Typha serves.
const (
	SyncerTypeFelix SyncerType = "felix"
	SyncerTypeBGP   SyncerType = "bgp"
)

// SyncStatus is Calico's api.SyncStatus numbering.
type SyncStatus uint8

// Calico's sync statuses.
const (
	StatusWaitForDatastore SyncStatus = iota
	StatusResyncInProgress
	StatusInSync
)

// FromDatastore converts a datastore syncer status.
func FromDatastore(s datastore.SyncStatus) SyncStatus {
	if s == datastore.StatusInSync {
		return StatusInSync
	}
	return StatusWaitForDatastore
}

// UpdateType is Calico's api.UpdateType numbering.
type UpdateType uint8

// Calico's update types.
const (
	UpdateTypeKVUnknown UpdateType = iota
	UpdateTypeKVNew
	UpdateTypeKVUpdated
	UpdateTypeKVDeleted
)

// Envelope wraps every message so that one gob stream carries them all.
type Envelope struct {
	Message any
}

// MsgClientHello opens the handshake.
type MsgClientHello struct {
	Hostname   string
	Info       string
	Version    string
	SyncerType SyncerType
	// SupportsDecoderRestart: the client takes MsgDecoderRestart, needed
	// for compression.
	SupportsDecoderRestart         bool
	SupportedCompressionAlgorithms []string
	ClientConnID                   uint64
}

// MsgServerHello answers it.
type MsgServerHello struct {
	Version                     string
	SyncerType                  SyncerType
	SupportsNodeResourceUpdates bool
	ServerConnID                uint64
}

// CompressionSnappy is Calico's name for snappy's framed stream format.
const CompressionSnappy = "snappy"

// MsgDecoderRestart tells the client that what follows is a new stream
// (compressed with CompressionAlgorithm, "" for none) to be read by a
// new decoder; the client answers MsgACK once it has one.
type MsgDecoderRestart struct {
	Message              string
	CompressionAlgorithm string
}

// MsgACK acknowledges a MsgDecoderRestart.
type MsgACK struct{}

// MsgSyncStatus carries the server's datastore status.
type MsgSyncStatus struct {
	SyncStatus SyncStatus
}

// MsgPing is the server's keepalive.
type MsgPing struct {
	Timestamp time.Time
}

// MsgPong answers a ping.
type MsgPong struct {
	PingTimestamp time.Time
	PongTimestamp time.Time
}

// MsgKVs carries updates.
type MsgKVs struct {
	KVs []SerializedUpdate
}

func init() {
	// Calico's registered names, so the envelopes read alike.
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgClientHello", MsgClientHello{})
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgDecoderRestart", MsgDecoderRestart{})
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgACK", MsgACK{})
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgServerHello", MsgServerHello{})
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgSyncStatus", MsgSyncStatus{})
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgPing", MsgPing{})
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgPong", MsgPong{})
	gob.RegisterName("github.com/projectcalico/typha/pkg/syncproto.MsgKVs", MsgKVs{})
}

// SerializedUpdate is one key's change, encoded once and sent to every
// client. Value is nil for a deletion.
type SerializedUpdate struct {
	Key               string
	Value             []byte
	V3ResourceVersion string
	UpdateType        UpdateType
}

// KeyPath is a datastore key as a SerializedUpdate names it.
func KeyPath(k datastore.Key) string {
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// ErrBadKey: a key that is not "<Kind>/<namespace>/<name>".
var ErrBadKey = errors.New("unable to parse key")

// ParseKey reverses KeyPath.
func ParseKey(p string) (datastore.Key, error) {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return datastore.Key{}, fmt.Errorf("%w: %q", ErrBadKey, p)
	}
	return datastore.Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, nil
}

// Serialize encodes a syncer update.
func Serialize(u datastore.Update) (SerializedUpdate, error) {
	su := SerializedUpdate{Key: KeyPath(u.Key)}
	switch u.Type {
	case datastore.EventDeleted:
		su.UpdateType = UpdateTypeKVDeleted
		return su, nil
	case datastore.EventModified:
		su.UpdateType = UpdateTypeKVUpdated
	default:
		su.UpdateType = UpdateTypeKVNew
	}
	if u.Object == nil {
		return su, fmt.Errorf("update of %s has no object", u.Key)
	}
	su.V3ResourceVersion = u.Object.GetResourceVersion()
	v, err := json.Marshal(u.Object)
	if err != nil {
		return su, fmt.Errorf("encoding %s: %w", u.Key, err)
	}
	su.Value = v
	return su, nil
}

// Deleted reports whether su deletes its key.
func (su SerializedUpdate) Deleted() bool { return su.Value == nil }

// Decode returns the key and, unless su is a deletion, the object.
func (su SerializedUpdate) Decode() (datastore.Key, v3.Resource, error) {
	k, err := ParseKey(su.Key)
	if err != nil || su.Deleted() {
		return k, nil, err
	}
	obj, err := newObject(k.Kind)
	if err != nil {
		return k, nil, err
	}
	if err := json.Unmarshal(su.Value, obj); err != nil {
		return k, nil, fmt.Errorf("decoding %s: %w", su.Key, err)
	}
	if k.Kind == v3.KindKubernetesEndpointSlice {
		obj.(*v3.KubernetesEndpointSlice).Kind = v3.KindKubernetesEndpointSlice
	}
	obj.SetResourceVersion(su.V3ResourceVersion)
	return k, obj, nil
}

func newObject(kind string) (v3.Resource, error) {
	if kind == v3.KindKubernetesEndpointSlice {
		return &v3.KubernetesEndpointSlice{}, nil
	}
	info, ok := v3.LookupKind(kind)
	if !ok {
		return nil, fmt.Errorf("%w %q", v3.ErrUnknownKind, kind)
	}
	return info.New(), nil
}
