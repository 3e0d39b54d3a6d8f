package etcd

import (
	"fmt"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
)

const (
	resourcePrefix = "/calico/resources/v3/projectcalico.org/"
	ipamPrefix     = ipamformat.Prefix
)

// kindPrefix is the folder holding every object of a kind (not for the
// IPAM kinds, whose layout is in ipamkeys.go).
func kindPrefix(info v3.KindInfo) string {
	return resourcePrefix + info.Plural + "/"
}

// listPrefix is the folder to list for a kind, restricted to a namespace.
func listPrefix(info v3.KindInfo, namespace string) string {
	p := kindPrefix(info)
	if info.Namespaced && namespace != "" {
		p += namespace + "/"
	}
	return p
}

// keyFor returns the etcd key of one object. An affinity's name stands
// for a key in each type folder (keysFor): keyFor gives the host one, and
// refuses a name that splits into node and block in several ways.
func keyFor(info v3.KindInfo, k datastore.Key) (string, error) {
	keys, err := keysFor(info, k)
	if err != nil {
		return "", err
	}
	if info.Kind == v3.KindBlockAffinity && len(keys) == len(ipamformat.AffinityTypes) {
		return keys[0], nil
	}
	if len(keys) != 1 {
		return "", fmt.Errorf("%s %q may be stored at any of %d keys", info.Kind, k.Name, len(keys))
	}
	return keys[0], nil
}

// keysFor returns the etcd keys an object's key may stand for: one, but
// for a BlockAffinity whose name splits into node and block in several
// ways (or in either type folder).
func keysFor(info v3.KindInfo, k datastore.Key) ([]string, error) {
	if k.Name == "" {
		return nil, fmt.Errorf("a name is required")
	}
	if strings.Contains(k.Name, "/") || strings.Contains(k.Namespace, "/") {
		return nil, fmt.Errorf("names may not contain '/'")
	}
	if ipamformat.IsIPAMKind(info.Kind) {
		if k.Namespace != "" {
			return nil, fmt.Errorf("%s is cluster-scoped: no namespace allowed", info.Kind)
		}
		return ipamKeysForName(info.Kind, k.Name)
	}
	key, err := resourceKeyFor(info, k)
	if err != nil {
		return nil, err
	}
	return []string{key}, nil
}

// resourceKeyFor is the key of a v3 resource (not an IPAM kind).
func resourceKeyFor(info v3.KindInfo, k datastore.Key) (string, error) {
	if info.Namespaced {
		if k.Namespace == "" {
			return "", fmt.Errorf("a namespace is required for %s", info.Kind)
		}
		return kindPrefix(info) + k.Namespace + "/" + k.Name, nil
	}
	if k.Namespace != "" {
		return "", fmt.Errorf("%s is cluster-scoped: no namespace allowed", info.Kind)
	}
	return kindPrefix(info) + k.Name, nil
}

// keyFromStorage returns the key of the object stored at etcd key ekey
// under info's folder, as far as the etcd key tells.
func keyFromStorage(info v3.KindInfo, ekey string) datastore.Key {
	if ipamformat.IsIPAMKind(info.Kind) {
		pk, _, err := ipamformat.ParseKey(info.Kind, ekey)
		if err != nil || pk.Name == "" {
			// Not a key of Calico's layout: name it by its path.
			return datastore.Key{Kind: info.Kind, Name: strings.TrimPrefix(ekey, ipamPrefix)}
		}
		return datastore.Key{Kind: info.Kind, Name: pk.Name}
	}
	rest := strings.TrimPrefix(ekey, kindPrefix(info))
	k := datastore.Key{Kind: info.Kind, Name: rest}
	if info.Namespaced {
		if ns, name, ok := strings.Cut(rest, "/"); ok {
			k.Namespace, k.Name = ns, name
		}
	}
	return k
}
