package etcd

import (
	"fmt"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

const (
	resourcePrefix = "/calico/resources/v3/projectcalico.org/"
	ipamPrefix     = "/calico/ipam/v2/"
)

// ipamDirs maps the IPAM bookkeeping kinds to their folder under ipamPrefix.
var ipamDirs = map[string]string{
	"IPAMBlock":         "assignment/block/",
	"BlockAffinity":     "affinity/",
	"IPAMHandle":        "handle/",
	"IPAMConfiguration": "config/",
}

// kindPrefix is the folder holding every object of a kind.
func kindPrefix(info v3.KindInfo) string {
	if d, ok := ipamDirs[info.Kind]; ok {
		return ipamPrefix + d
	}
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

// keyFor returns the etcd key of one object.
func keyFor(info v3.KindInfo, k datastore.Key) (string, error) {
	if k.Name == "" {
		return "", fmt.Errorf("a name is required")
	}
	if strings.Contains(k.Name, "/") || strings.Contains(k.Namespace, "/") {
		return "", fmt.Errorf("names may not contain '/'")
	}
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
	rest := strings.TrimPrefix(ekey, kindPrefix(info))
	k := datastore.Key{Kind: info.Kind, Name: rest}
	if info.Namespaced {
		if ns, name, ok := strings.Cut(rest, "/"); ok {
			k.Namespace, k.Name = ns, name
		}
	}
	return k
}
