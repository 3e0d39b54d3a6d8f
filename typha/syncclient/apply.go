package syncclient

import (
	"sort"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// apply turns one received update into the update for the consumer, if
// it changes what was delivered.
func (c *Client) apply(su syncproto.SerializedUpdate) (datastore.Update, bool) {
	k, obj, err := su.Decode()
	if err != nil {
		if !c.badKeys[su.Key] {
			c.badKeys[su.Key] = true
			c.cfg.Log.Error("cannot read an update from Typha; dropping it", "key", su.Key, "error", err)
		}
		if k.Kind == "" {
			return datastore.Update{}, false
		}
		obj = nil // dropped: as a deletion
	} else if c.badKeys[su.Key] {
		delete(c.badKeys, su.Key)
	}
	if c.kinds != nil && !c.kinds[k.Kind] {
		return datastore.Update{}, false
	}
	old, had := c.delivered[k]
	if obj == nil {
		if !had {
			return datastore.Update{}, false
		}
		delete(c.delivered, k)
		return datastore.Update{Type: datastore.EventDeleted, Key: k, Object: old.obj}, true
	}
	if had && old.rv == su.V3ResourceVersion {
		return datastore.Update{}, false
	}
	e := entry{rv: su.V3ResourceVersion}
	if !c.cfg.Lean {
		e.obj = obj
	}
	c.delivered[k] = e
	typ := datastore.EventAdded
	if had {
		typ = datastore.EventModified
	}
	return datastore.Update{Type: typ, Key: k, Object: obj}, true
}

// diff returns the updates from what was delivered to snapshot, in key
// order.
func (c *Client) diff(snapshot map[string]syncproto.SerializedUpdate) []datastore.Update {
	var ups []datastore.Update
	seen := make(map[datastore.Key]bool, len(snapshot))
	keys := make([]string, 0, len(snapshot))
	for k := range snapshot {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		su := snapshot[key]
		if k, err := syncproto.ParseKey(key); err == nil {
			seen[k] = true
		}
		if u, ok := c.apply(su); ok {
			ups = append(ups, u)
		}
	}
	var gone []datastore.Key
	for k := range c.delivered {
		if !seen[k] {
			gone = append(gone, k)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return gone[i].String() < gone[j].String() })
	for _, k := range gone {
		old := c.delivered[k]
		delete(c.delivered, k)
		ups = append(ups, datastore.Update{Type: datastore.EventDeleted, Key: k, Object: old.obj})
	}
	return ups
}
