package daemon

import (
	"maps"
	"net/netip"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// intake is what arrived since the last computation: the calculation's
// resources changed (the latest change per key), the snapshot sizes
// announced, and the inputs kept whole because they are few (IP pools and
// nodes, the default and this node's FelixConfiguration, the interface
// addresses), each with a flag saying it changed. The Daemon's lock
// guards it.
type intake struct {
	pending map[datastore.Key]pendingChange
	sizes   map[string]int

	pools          map[string]*v3.IPPool
	nodes          map[string]*v3.Node
	clusterChanged bool

	global, node  *v3.FelixConfigurationSpec
	configChanged bool

	ifaces        map[string][]netip.Addr
	ifacesChanged bool
}

// pendingChange is the latest change of one of the calculation's
// resources: its new version, or deleted.
type pendingChange struct {
	obj     v3.Resource
	deleted bool
}

func newIntake() intake {
	// The first computation reads the cluster and the configuration even
	// when the snapshot holds none: the route manager waits for a cluster,
	// the rendering for the configuration's first reading.
	return intake{pending: map[datastore.Key]pendingChange{}, sizes: map[string]int{},
		pools: map[string]*v3.IPPool{}, nodes: map[string]*v3.Node{}, clusterChanged: true, configChanged: true}
}

// add records the updates; it reports whether one concerns the
// calculation (the route manager's own kinds do not).
func (in *intake) add(ups []datastore.Update, nodeName string) bool {
	changed := false
	for _, u := range ups {
		deleted := u.Type == datastore.EventDeleted
		switch u.Key.Kind {
		case v3.KindIPAMBlock:
			continue // the route manager's only
		case v3.KindIPPool:
			setOrDelete(in.pools, u.Key.Name, u.Object, deleted)
			in.clusterChanged = true
		case v3.KindNode:
			setOrDelete(in.nodes, u.Key.Name, u.Object, deleted)
			in.clusterChanged = true
		case v3.KindFelixConfiguration:
			if !in.addConfig(u, nodeName, deleted) {
				continue // another node's
			}
		default:
			in.pending[u.Key] = pendingChange{obj: u.Object, deleted: deleted}
		}
		changed = true
	}
	return changed
}

// addConfig records the default or this node's FelixConfiguration; it
// reports false for another node's.
func (in *intake) addConfig(u datastore.Update, nodeName string, deleted bool) bool {
	var spec *v3.FelixConfigurationSpec
	if fc, ok := u.Object.(*v3.FelixConfiguration); ok && !deleted {
		spec = &fc.Spec
	}
	switch u.Key.Name {
	case "default":
		in.global = spec
	case v3.FelixConfigurationNamePrefix + nodeName:
		in.node = spec
	default:
		return false
	}
	in.configChanged = true
	return true
}

// setOrDelete keeps o (of type T) under name, or removes it.
func setOrDelete[T any](m map[string]*T, name string, o v3.Resource, deleted bool) {
	if t, ok := any(o).(*T); ok && !deleted {
		m[name] = t
	} else {
		delete(m, name)
	}
}

// taken is one computation's input: the calculation's changes and
// snapshot sizes, and each input kept whole when it changed.
type taken struct {
	sizes   map[string]int
	changes map[datastore.Key]pendingChange
	// pools and nodes (sorted by name) when clusterChanged.
	clusterChanged bool
	pools          []*v3.IPPool
	nodes          []*v3.Node
	// global and node when configChanged.
	configChanged bool
	global, node  *v3.FelixConfigurationSpec
	// ifaces when ifacesChanged.
	ifacesChanged bool
	ifaces        map[string][]netip.Addr
}

// take hands out what arrived and starts afresh. Before the first full
// snapshot (inSync false) only the calculation's changes and sizes are
// handed out (loaded while the rest of the snapshot is read; ok false),
// the rest waits. The maps handed out are the caller's: OnUpdates goes on
// writing into new ones.
func (in *intake) take(inSync bool) (t taken, ok bool) {
	t.sizes, in.sizes = in.sizes, map[string]int{}
	if len(in.pending) > 0 {
		t.changes, in.pending = in.pending, map[datastore.Key]pendingChange{}
	}
	if !inSync {
		return t, false
	}
	if in.clusterChanged {
		in.clusterChanged, t.clusterChanged = false, true
		for _, name := range slices.Sorted(maps.Keys(in.pools)) {
			t.pools = append(t.pools, in.pools[name])
		}
		for _, name := range slices.Sorted(maps.Keys(in.nodes)) {
			t.nodes = append(t.nodes, in.nodes[name])
		}
	}
	if in.configChanged {
		in.configChanged, t.configChanged = false, true
		t.global, t.node = in.global, in.node
	}
	if in.ifacesChanged {
		in.ifacesChanged, t.ifacesChanged = false, true
		t.ifaces = in.ifaces
	}
	return t, true
}
